package pebble

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-stream/weir/store"
)

// maxTimestampSecond is the last second a store.Timestamp can hold.
const maxTimestampSecond = 1<<(64-store.TimestampCounterBits) - 1

// timestampOracle issues Timestamps: the YTsaurus layout, unix seconds << 30
// | counter.
//
// Invariants:
//   - issued timestamps strictly increase: each is max(last+1, now<<30), so a
//     clock that goes back only makes the counter run on, and a counter that
//     overflows a second carries into the next second (borrowing it from the
//     future; the layout stays valid and the order strict);
//   - every timestamp ever issued is below ceiling<<30, where ceiling (a unix
//     second) is persisted with a synced write before any timestamp at or above
//     the previous ceiling is returned. Open starts at the persisted ceiling, so
//     timestamps stay unique across restarts and crashes whatever the clock
//     does. The ceiling moves in steps of reserve, so the synced write happens
//     about once per reserve of clock time, not once per timestamp.
type timestampOracle struct {
	mu            sync.Mutex
	reserve       time.Duration
	last          store.Timestamp
	ceiling       uint64 // persisted: issued timestamps < ceiling << 30
	ceilingWrites int    // synced ceiling writes by this incarnation (tests)
}

// init starts the oracle above everything an earlier incarnation issued.
func (o *timestampOracle) init(ceiling uint64) {
	o.ceiling = ceiling
	if ceiling > 0 {
		o.last = store.Timestamp(ceiling<<store.TimestampCounterBits - 1)
	}
}

// Timestamp issues a new Timestamp, strictly greater than every Timestamp
// issued before by this store, across restarts included.
func (s *Store) Timestamp(ctx context.Context) (store.Timestamp, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.enterUsable(); err != nil {
		return 0, err
	}
	defer s.exit()
	return s.issueTimestamps(1)
}

// issueTimestamps issues n consecutive Timestamps and returns the first.
// REQUIRES: the caller is inside enter/exit.
func (s *Store) issueTimestamps(n int) (store.Timestamp, error) {
	o := &s.ts
	o.mu.Lock()
	defer o.mu.Unlock()
	sec := s.clock.Now().Unix()
	if sec < 0 {
		sec = 0
	}
	next := max(o.last+1, store.Timestamp(uint64(sec)<<store.TimestampCounterBits))
	last := next + store.Timestamp(n-1)
	lastSec := uint64(last) >> store.TimestampCounterBits
	if lastSec >= maxTimestampSecond-uint64(o.reserveSeconds()) {
		return 0, fmt.Errorf("pebble store: timestamp: second %d is beyond the timestamp range", lastSec)
	}
	if lastSec >= o.ceiling {
		ceiling := lastSec + 1 + o.reserveSeconds()
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Set(metaTimestampCeiling, encodeUint64(ceiling), nil); err != nil {
			return 0, fmt.Errorf("pebble store: timestamp: %w", err)
		}
		if err := s.apply(b); err != nil {
			return 0, fmt.Errorf("pebble store: timestamp: persist ceiling: %w", err)
		}
		o.ceiling = ceiling
		o.ceilingWrites++
	}
	o.last = last
	return next, nil
}

// reserveSeconds is reserve rounded up to whole seconds.
func (o *timestampOracle) reserveSeconds() uint64 {
	return uint64((o.reserve + time.Second - 1) / time.Second)
}
