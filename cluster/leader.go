package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-stream/weir/store"
)

// leaderKey is the flow_state row naming the active controller.
const leaderKey = "cluster/leader"

// LeaderRecord is the content of the leader row.
type LeaderRecord struct {
	// Lease is the active controller's leadership lease; its id is also the
	// controller's term (leases are issued in increasing order, so a later
	// leader has a larger term).
	Lease store.LeaseID `json:"lease"`
	ID    string        `json:"id"`
	Admin string        `json:"admin,omitempty"`
}

// Leadership is a won election: the controller acts only while its lease
// is alive, and every store write of its controller requires that lease
// (FencedStore).
type Leadership struct {
	st     store.Store
	Record LeaderRecord
	lost   chan struct{}
	// once guards err and the close of lost: Keep and Check may both find
	// the leadership over.
	once sync.Once
	err  error
	// timeout is the lease's timeout, and renewed the local (monotonic)
	// time at which the last successful ping — or the lease's creation —
	// started: the store extended the lease by timeout at some moment
	// after it, so the lease cannot outlive renewed+timeout. Keep steps
	// down at that deadline on its own, without waiting for a ping to say
	// so: a controller cut off from the store must stop acting before a
	// standby may take over, not when the network comes back.
	timeout time.Duration
	mu      sync.Mutex // guards renewed (Keep writes it, Check reads it)
	renewed time.Time
}

// sinceRenewed is how long ago the last successful renewal started.
func (l *Leadership) sinceRenewed() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.renewed)
}

// expiredOnOwnClock ends the leadership if its lease cannot be active any
// more by this process's own clock (no renewal for the lease timeout), and
// reports whether it is over. A process that was frozen or cut off finds
// out here before any store call answers.
func (l *Leadership) expiredOnOwnClock() bool {
	if since := l.sinceRenewed(); since >= l.timeout {
		l.step(fmt.Errorf("cluster: leadership lease expired: no successful renewal for %v (lease timeout %v)", since.Round(time.Millisecond), l.timeout))
	}
	return l.Err() != nil
}

// Term is the leadership's term (its lease id): workers refuse requests of
// a lower term than the highest they have seen.
func (l *Leadership) Term() uint64 { return uint64(l.Record.Lease) }

// Lost is closed when the leadership ended (its lease could not be pinged:
// a standby may have taken over).
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err says why the leadership was lost.
func (l *Leadership) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

// ReadLeader returns the leader row (ok false: no controller ever led).
func ReadLeader(ctx context.Context, st store.Store) (LeaderRecord, bool, error) {
	v, ok, err := st.Get(ctx, store.FlowState, []byte(leaderKey))
	if err != nil || !ok {
		return LeaderRecord{}, false, err
	}
	var r LeaderRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return LeaderRecord{}, false, fmt.Errorf("cluster: leader row: %w", err)
	}
	return r, true, nil
}

// Campaign waits until this controller is the active one: while the
// recorded leader's lease is alive it polls every poll; once that lease
// ended (aborted, expired: judged by the store's clock) it creates its own
// lease of timeout and swaps the row in a transaction that checks the row
// is unchanged (two standbys racing: one wins) and requires the new lease.
// Standbys take over within timeout (+ poll) of the leader's death.
func Campaign(ctx context.Context, st store.Store, me LeaderRecord, timeout, poll time.Duration) (*Leadership, error) {
	for {
		old, had, err := st.Get(ctx, store.FlowState, []byte(leaderKey))
		if err == nil {
			var free bool
			if free, err = leaderGone(ctx, st, old, had); err == nil && free {
				l, won, err := claim(ctx, st, me, old, had, timeout)
				if err != nil {
					return nil, err
				}
				if won {
					return l, nil
				}
			}
		}
		if errors.Is(err, store.ErrClosed) {
			return nil, err
		}
		// Any other failure (the database restarting, unreachable) is
		// tried again at the next poll.
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// leaderGone reports whether the recorded leader's lease has ended.
func leaderGone(ctx context.Context, st store.Store, old []byte, had bool) (bool, error) {
	if !had {
		return true, nil
	}
	var r LeaderRecord
	if err := json.Unmarshal(old, &r); err != nil {
		return true, nil // unreadable: take over (the check still serializes)
	}
	ls, err := st.LeaseState(ctx, r.Lease)
	if err != nil {
		return false, err
	}
	return ls != store.LeaseActive, nil
}

// claim tries to swap the leader row from old to a record of a new lease.
func claim(ctx context.Context, st store.Store, me LeaderRecord, old []byte, had bool, timeout time.Duration) (*Leadership, bool, error) {
	created := time.Now()
	lease, err := st.CreateLease(ctx, timeout)
	if err != nil {
		return nil, false, nil //nolint:nilerr // retried at the next poll
	}
	me.Lease = lease
	v, _ := json.Marshal(me)
	txn := store.NewTxn(lease)
	if had {
		txn.CheckValue(store.FlowState, []byte(leaderKey), old)
	} else {
		txn.CheckAbsent(store.FlowState, []byte(leaderKey))
	}
	txn.Put(store.FlowState, []byte(leaderKey), v)
	if err := st.Commit(ctx, txn); err != nil {
		if store.Classify(err) == store.ClassAmbiguous {
			// The swap may have landed: read it back, never guess.
			now, ok, rerr := st.Get(ctx, store.FlowState, []byte(leaderKey))
			if rerr == nil && ok && string(now) == string(v) {
				return &Leadership{st: st, Record: me, lost: make(chan struct{}), timeout: timeout, renewed: created}, true, nil
			}
		}
		// Another standby won, or the commit failed: give the lease up
		// (fencing anything of it) and try again at the next poll.
		_ = st.AbortLease(context.WithoutCancel(ctx), lease)
		return nil, false, nil
	}
	return &Leadership{st: st, Record: me, lost: make(chan struct{}), timeout: timeout, renewed: created}, true, nil
}

// Keep pings the leadership lease every period until ctx ends or the
// leadership is lost (then Lost is closed): a ping says the lease is lost,
// or no ping succeeded for the lease's timeout — the lease may have
// expired, and a standby may take over at any moment, so this controller
// steps down on its own clock (renewed says why that is safe). Failed pings
// of another kind (the store unreachable for a moment) are retried until
// then.
func (l *Leadership) Keep(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.expiredOnOwnClock() {
			return
		}
		remaining := l.timeout - l.sinceRenewed()
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, remaining)
		err := l.st.PingLease(pctx, l.Record.Lease)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.renewed = start
			l.mu.Unlock()
		case store.Classify(err) == store.ClassLeaseLost:
			l.step(fmt.Errorf("cluster: leadership lost: %w", err))
			return
		}
	}
}

// step ends the leadership with err (the first call wins).
func (l *Leadership) step(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.lost)
	})
}

// Check asks the store whether this leadership still holds — its lease is
// active by the store's clock and the leader row names it — and returns the
// highest term the store knows of (this one's while it holds). A
// leadership the store says is over ends now (Lost is closed, so the
// controller stops acting) instead of at Keep's next ping: a controller
// cut off from the store, or frozen, may come back after a standby took
// over and must not present itself as the leader meanwhile (issue 27: a
// healed controller answered "active" with its old term for up to 7.5 s).
// A store error leaves the leadership to its own clock (no renewal for
// the lease timeout: over) and is returned; the own clock is asked first,
// so a controller thawed after its lease's timeout answers "over" even if
// its first store call fails.
func (l *Leadership) Check(ctx context.Context) (held bool, highest uint64, err error) {
	highest = l.Term()
	expired := l.expiredOnOwnClock()
	rec, ok, err := ReadLeader(ctx, l.st)
	if err != nil {
		return !expired, highest, err
	}
	if ok && uint64(rec.Lease) > highest {
		highest = uint64(rec.Lease)
	}
	if l.Err() != nil {
		return false, highest, nil
	}
	if ok && rec.Lease != l.Record.Lease {
		l.step(fmt.Errorf("cluster: leadership lost: the leader row names %s (term %d)", rec.ID, rec.Lease))
		return false, highest, nil
	}
	ls, err := l.st.LeaseState(ctx, l.Record.Lease)
	if err != nil {
		return !l.expiredOnOwnClock(), highest, err
	}
	if ls != store.LeaseActive {
		l.step(fmt.Errorf("cluster: leadership lost: the store says its lease is %v", ls))
		return false, highest, nil
	}
	return true, highest, nil
}

// Resign ends the leadership at once (a clean shutdown): a standby takes
// over at its next poll instead of after the lease timeout.
func (l *Leadership) Resign(ctx context.Context) error {
	return l.st.AbortLease(ctx, l.Record.Lease)
}
