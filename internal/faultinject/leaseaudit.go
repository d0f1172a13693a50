// Package faultinject holds store wrappers shared by the engine's
// fault-injection tests (internal/enginetest, internal/chaos).
package faultinject

import (
	"context"
	"sync"

	"github.com/weir-stream/weir/store"
)

// LeaseAudit wraps a store's lease calls for fault injection and audit: it
// can make the pings of chosen leases vanish (they report success but never
// reach the store, so the lease expires), and it remembers every lease found
// ended (aborted, or observed expired), so that a wrapper's Commit can count
// the commits a zombie attempts with an ended lease.
type LeaseAudit struct {
	store.Store

	mu        sync.Mutex
	dropPings map[store.LeaseID]bool
	ended     map[store.LeaseID]bool
}

// NewLeaseAudit wraps st.
func NewLeaseAudit(st store.Store) *LeaseAudit {
	return &LeaseAudit{Store: st, dropPings: map[store.LeaseID]bool{}, ended: map[store.LeaseID]bool{}}
}

// DropPings makes the pings of lease id vanish.
func (a *LeaseAudit) DropPings(id store.LeaseID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropPings[id] = true
}

// Ended reports whether lease id was seen aborted or expired.
func (a *LeaseAudit) Ended(id store.LeaseID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended[id]
}

// AnyEnded reports whether any of ids was seen ended: a commit naming one
// is a zombie's.
func (a *LeaseAudit) AnyEnded(ids []store.LeaseID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if a.ended[id] {
			return true
		}
	}
	return false
}

// PingLease implements store.Store; a dropped ping reports success.
func (a *LeaseAudit) PingLease(ctx context.Context, id store.LeaseID) error {
	a.mu.Lock()
	drop := a.dropPings[id]
	a.mu.Unlock()
	if drop {
		return nil
	}
	return a.Store.PingLease(ctx, id)
}

// AbortLease implements store.Store and records the lease as ended.
func (a *LeaseAudit) AbortLease(ctx context.Context, id store.LeaseID) error {
	err := a.Store.AbortLease(ctx, id)
	if err == nil {
		a.mu.Lock()
		a.ended[id] = true
		a.mu.Unlock()
	}
	return err
}

// LeaseState implements store.Store and records ended leases.
func (a *LeaseAudit) LeaseState(ctx context.Context, id store.LeaseID) (store.LeaseState, error) {
	s, err := a.Store.LeaseState(ctx, id)
	if err == nil && (s == store.LeaseExpired || s == store.LeaseAborted) {
		a.mu.Lock()
		a.ended[id] = true
		a.mu.Unlock()
	}
	return s, err
}
