package pebble

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// Lease ids
//
// A LeaseID is (block << 32) | counter with counter in [1, 2^32). The block is
// persisted under metaIncarnation: Open reserves block = persisted+1 with a
// synced write before it hands out any id, and a process that uses up the
// 2^32-1 counters of its block reserves the next block the same way. Every
// id ever handed out therefore lies in a block that was durably reserved
// before, and a later incarnation starts above it: ids are never reused, not
// even after a crash. No id is zero, because blocks start at 1.
const (
	leaseCounterBits = 32
	maxLeaseCounter  = 1<<leaseCounterBits - 1
	maxLeaseBlock    = 1<<(64-leaseCounterBits) - 1
)

// leaseTable holds the leases of this incarnation. Ended leases stay in the
// table (a few dozen bytes each, one per job run) so that LeaseState keeps
// reporting Aborted or Expired rather than Unknown; both fail commits alike.
type leaseTable struct {
	mu    sync.Mutex
	byID  map[store.LeaseID]*lease
	block uint64 // current id block (incarnation)
	next  uint64 // next counter of the block; > maxLeaseCounter when used up
}

// init reserves the id block after persisted, adding its write to b (which
// Open commits with Sync before the Store is returned).
func (t *leaseTable) init(s *Store, b *pebbledb.Batch, persisted uint64) error {
	if persisted >= maxLeaseBlock {
		return fmt.Errorf("pebble store: lease id blocks exhausted (%d)", persisted)
	}
	t.byID = make(map[store.LeaseID]*lease)
	t.block = persisted + 1
	t.next = 1
	if err := b.Set(metaIncarnation, encodeUint64(t.block), nil); err != nil {
		return fmt.Errorf("pebble store: %w", err)
	}
	return nil
}

// create registers a new active lease. It may write (rarely: when the id
// block is used up), so the caller must have entered the Store.
func (t *leaseTable) create(s *Store, timeout time.Duration, now time.Time) (store.LeaseID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next > maxLeaseCounter {
		if t.block >= maxLeaseBlock {
			return 0, fmt.Errorf("pebble store: lease id blocks exhausted (%d)", t.block)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Set(metaIncarnation, encodeUint64(t.block+1), nil); err != nil {
			return 0, fmt.Errorf("pebble store: %w", err)
		}
		if err := s.apply(b); err != nil {
			return 0, fmt.Errorf("pebble store: reserve lease ids: %w", err)
		}
		t.block++
		t.next = 1
	}
	id := store.LeaseID(t.block<<leaseCounterBits | t.next)
	t.next++
	t.byID[id] = &lease{id: id, timeout: timeout, state: store.LeaseActive, lastPing: now}
	return id, nil
}

func (t *leaseTable) lookup(id store.LeaseID) *lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// hold read-holds the barriers of every lease in ids, in increasing id order
// (a fixed order, so two commits naming the same leases cannot deadlock with
// an abort waiting between them), after checking each is active. On success
// the caller must call release once its write has returned. On failure
// nothing is held and the error is a *store.LeaseLostError.
func (t *leaseTable) hold(clk clock.Clock, ids []store.LeaseID, broken <-chan struct{}) (release func(), err error) {
	if len(ids) == 0 {
		return func() {}, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	held := make([]*lease, 0, len(ids))
	releaseAll := func() {
		for _, l := range held {
			l.barrier.RUnlock()
		}
		held = held[:0]
	}
retry:
	for _, id := range ids {
		l := t.lookup(id)
		if l == nil {
			releaseAll()
			return nil, &store.LeaseLostError{Lease: id, State: store.LeaseUnknown}
		}
		l.barrier.RLock()
		st, pings, expired := l.observe(clk.Now())
		if st == store.LeaseActive && !expired {
			held = append(held, l)
			continue
		}
		l.barrier.RUnlock()
		// Release before expiring: expire waits for every reader of the
		// barrier, this commit's other leases' readers included.
		releaseAll()
		if expired {
			var ok bool
			if st, ok = l.expire(pings, broken); !ok {
				return nil, fmt.Errorf("pebble store: expire %s: %w", id, ErrBroken)
			}
			if st == store.LeaseActive {
				goto retry // pinged since we looked; look again
			}
		}
		return nil, &store.LeaseLostError{Lease: id, State: st}
	}
	return releaseAll, nil
}

// lease is one lease of this incarnation.
//
// Invariant: state leaves LeaseActive only while barrier is write-held, so an
// ended state is observed only after every commit that saw the lease active
// (and read-held the barrier) has finished its write. Ended states are final.
type lease struct {
	id      store.LeaseID
	timeout time.Duration
	barrier sync.RWMutex

	mu       sync.Mutex // guards the fields below
	state    store.LeaseState
	lastPing time.Time
	pings    uint64 // successful pings; tells expire whether a ping intervened
}

// observe returns the state; expired reports an active lease whose timeout
// has run out at now (lastPing + timeout <= now), which the caller must move
// to LeaseExpired with expire before reporting it.
func (l *lease) observe(now time.Time) (st store.LeaseState, pings uint64, expired bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, l.pings, l.state == store.LeaseActive && l.expiredAt(now)
}

// expiredAt: REQUIRES l.mu held.
func (l *lease) expiredAt(now time.Time) bool { return !now.Before(l.lastPing.Add(l.timeout)) }

// expire moves the lease to LeaseExpired under the write-held barrier, unless
// it was pinged since the observation that found it expired (pings changed).
// It returns the state afterwards, and false if the Store broke while it
// waited for the barrier (see withBarrier).
func (l *lease) expire(observedPings uint64, broken <-chan struct{}) (store.LeaseState, bool) {
	var st store.LeaseState
	ok := l.withBarrier(broken, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.state == store.LeaseActive && l.pings == observedPings {
			l.state = store.LeaseExpired
		}
		st = l.state
	})
	return st, ok
}

// withBarrier runs fn with the barrier write-held, waiting for every commit
// holding it for reading. If the Store breaks while it waits, a commit may
// be stuck inside Pebble forever (a failed WAL write can leave Pebble's
// commit pipeline locked), so withBarrier stops waiting and returns false;
// fn still runs, in the background, if the barrier ever frees.
func (l *lease) withBarrier(broken <-chan struct{}, fn func()) bool {
	if l.barrier.TryLock() {
		defer l.barrier.Unlock()
		fn()
		return true
	}
	got := make(chan struct{})
	go func() {
		l.barrier.Lock()
		close(got)
	}()
	select {
	case <-got:
		defer l.barrier.Unlock()
		fn()
		return true
	case <-broken:
		go func() {
			<-got
			defer l.barrier.Unlock()
			fn()
		}()
		return false
	}
}

// ping extends an active, unexpired lease.
func (l *lease) ping(now time.Time) (st store.LeaseState, pings uint64, expired bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != store.LeaseActive {
		return l.state, l.pings, false
	}
	if l.expiredAt(now) {
		return l.state, l.pings, true
	}
	if now.After(l.lastPing) { // a clock that went back must not shorten the lease
		l.lastPing = now
	}
	l.pings++
	return l.state, l.pings, false
}

// abort ends the lease under the write-held barrier: it waits for every
// commit that saw the lease active. An active lease whose timeout has already
// run out becomes Expired rather than Aborted; ended leases stay as they are.
// It returns false if the Store broke while it waited (see withBarrier).
func (l *lease) abort(now time.Time, broken <-chan struct{}) bool {
	return l.withBarrier(broken, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.state != store.LeaseActive {
			return
		}
		if l.expiredAt(now) {
			l.state = store.LeaseExpired
		} else {
			l.state = store.LeaseAborted
		}
	})
}

// CreateLease creates an active lease expiring timeout after its creation or
// last ping, by the store's clock. REQUIRES: timeout > 0.
func (s *Store) CreateLease(ctx context.Context, timeout time.Duration) (store.LeaseID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if timeout <= 0 {
		return 0, fmt.Errorf("pebble store: create lease: timeout %v is not positive", timeout)
	}
	if err := s.enterUsable(); err != nil {
		return 0, err
	}
	defer s.exit()
	return s.leases.create(s, timeout, s.clock.Now())
}

// PingLease extends an active lease by its timeout from now. It fails with a
// *store.LeaseLostError if the lease is not active (an expired lease found
// here is moved to LeaseExpired first; a ping never revives it).
func (s *Store) PingLease(ctx context.Context, id store.LeaseID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enterUsable(); err != nil {
		return err
	}
	defer s.exit()
	l := s.leases.lookup(id)
	if l == nil {
		return &store.LeaseLostError{Lease: id, State: store.LeaseUnknown}
	}
	for {
		st, pings, expired := l.ping(s.clock.Now())
		if expired {
			var ok bool
			if st, ok = l.expire(pings, s.brokenCh); !ok {
				return s.brokenErr()
			}
			if st == store.LeaseActive {
				continue
			}
		}
		if st != store.LeaseActive {
			return &store.LeaseLostError{Lease: id, State: st}
		}
		return nil
	}
}

// AbortLease ends the lease; see lease.abort. Aborting an ended or unknown
// lease succeeds. It works on a broken Store, except that it fails with
// ErrBroken rather than wait forever for a commit stuck in Pebble.
func (s *Store) AbortLease(ctx context.Context, id store.LeaseID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if l := s.leases.lookup(id); l != nil && !l.abort(s.clock.Now(), s.brokenCh) {
		return fmt.Errorf("pebble store: abort %s: a commit that saw it active is stuck in the broken store: %w", id, s.brokenErr())
	}
	return nil
}

// LeaseState reports the lease's state. An active lease whose timeout has run
// out is moved to LeaseExpired (waiting for in-flight commits) before it is
// reported, so LeaseExpired carries the barrier of AbortLease. It works on a
// broken Store.
func (s *Store) LeaseState(ctx context.Context, id store.LeaseID) (store.LeaseState, error) {
	if err := ctx.Err(); err != nil {
		return store.LeaseUnknown, err
	}
	if err := s.enter(); err != nil {
		return store.LeaseUnknown, err
	}
	defer s.exit()
	l := s.leases.lookup(id)
	if l == nil {
		return store.LeaseUnknown, nil
	}
	for {
		st, pings, expired := l.observe(s.clock.Now())
		if expired {
			var ok bool
			if st, ok = l.expire(pings, s.brokenCh); !ok {
				return store.LeaseUnknown, s.brokenErr()
			}
			if st == store.LeaseActive {
				continue
			}
		}
		return st, nil
	}
}
