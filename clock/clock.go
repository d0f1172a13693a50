// Package clock is the one source of time for weir's deterministic core.
//
// Core packages never call time.Now: they take a Clock, so tests can drive
// time by hand (Manual) and the engine can be simulated. The store owns the
// clock that decides lease expiry; everything that must agree with lease
// expiry reads time from the store's clock.
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Manual is a clock that moves only when told to. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock set to start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (d must not be negative) and returns the new time.
func (m *Manual) Advance(d time.Duration) time.Time {
	if d < 0 {
		panic("clock: Manual.Advance with a negative duration")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return m.now
}

// Set moves the clock to t. Time may go backwards: tests use it to model clock jumps.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
}
