package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-stream/weir/store"
)

// Leases are rows of the leases table: id (from a sequence, so never
// reused, across restarts and processes), timeout, expiry (unix ns by the
// store's clock), state (1 active, 2 aborted, 3 expired) and when it ended.
//
// The barrier. Every commit naming a lease runs hold_leases first, in its
// own transaction: it locks the lease's row FOR KEY SHARE if the row is
// active and unexpired, and holds the lock until the transaction ends.
// Ending a lease takes two steps, each its own transaction:
//
//  1. an UPDATE sets the state (aborted, or expired when its time has run
//     out) and commits. A plain UPDATE of non-key columns takes FOR NO KEY
//     UPDATE, which does not wait for the commits' FOR KEY SHARE locks (a
//     ping is such an UPDATE too, so pings never wait for commits). From
//     its commit on, no commit gets through hold_leases: a statement that
//     starts later sees the lease ended and locks nothing; one whose
//     snapshot is older may still lock the row (FOR KEY SHARE does not
//     re-check a row a non-key UPDATE replaced), but its second look, with
//     a snapshot taken after the lock, finds the lease ended, and it rolls
//     back;
//  2. a SELECT … FOR UPDATE, which conflicts with FOR KEY SHARE, waits for
//     every commit still holding the lock (PostgreSQL carries the lockers
//     of a row version to the version an UPDATE creates, so none escapes).
//
// Only then is the end reported: AbortLease returns, LeaseState reports
// Aborted or Expired, a commit reports the lease lost. Any caller that
// finds a lease ended runs step 2 itself before reporting it, so a report
// never overtakes a commit in flight even when another caller did step 1.
//
// Why two transactions: a single one would hold its row lock while
// waiting for the lockers, and new FOR KEY SHARE requests do not queue
// behind a waiting FOR UPDATE in PostgreSQL — committers arriving
// back to back could starve the abort. After step 1 only statements
// already started can still lock the row, so step 2 waits only for the
// commits already in flight.
const (
	stateActive  = 1
	stateAborted = 2
	stateExpired = 3
)

// leaseGCEvery is how often (store time) CreateLease sweeps ended leases.
const leaseGCEvery = 10 * time.Minute

// maxLeaseTimeout caps a lease's timeout (about 146 years) so that
// expiries stay within a bigint of nanoseconds.
const maxLeaseTimeout = time.Duration(1 << 62)

// maxPingRetries bounds PingLease's retries when its UPDATE found the lease
// expired but a concurrent ping had extended it.
const maxPingRetries = 8

// dbLeaseID maps a LeaseID to the row id: the same 64 bits as a signed
// bigint. Ids the store hands out are positive; others are simply unknown.
func dbLeaseID(id store.LeaseID) int64 { return int64(id) }

// CreateLease creates an active lease that expires timeout after its
// creation or last ping, by the store's clock. REQUIRES: timeout > 0.
func (s *Store) CreateLease(ctx context.Context, timeout time.Duration) (store.LeaseID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if timeout <= 0 {
		return 0, fmt.Errorf("postgres store: create lease: timeout %v is not positive", timeout)
	}
	timeout = min(timeout, maxLeaseTimeout)
	c, err := s.acquire(ctx, "create lease")
	if err != nil {
		return 0, err
	}
	defer c.Release()
	sent := time.Now()
	var id, now int64
	if err := c.QueryRow(ctx, s.sql.createLease, timeout.Nanoseconds(), s.nowParam()).Scan(&id, &now); err != nil {
		return 0, s.readErr(ctx, "create lease", err)
	}
	s.observeDBTime(sent, now)
	if last := s.lastLeaseGC.Load(); now-last >= int64(leaseGCEvery) && s.lastLeaseGC.CompareAndSwap(last, now) {
		// Best effort: a failed sweep is retried at the next one.
		_, _ = c.Exec(ctx, s.sql.gcLeases, s.retention.Nanoseconds(), s.nowParam())
	}
	return store.LeaseID(id), nil
}

// PingLease extends an active lease by its timeout from now. It fails with
// a *store.LeaseLostError if the lease is not active; an expired lease
// found here is ended first (with the barrier), never revived.
func (s *Store) PingLease(ctx context.Context, id store.LeaseID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := s.acquire(ctx, "ping lease")
	if err != nil {
		return err
	}
	defer c.Release()
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		var now int64
		err := c.QueryRow(ctx, s.sql.pingLease, dbLeaseID(id), s.nowParam()).Scan(&now)
		if err == nil {
			s.observeDBTime(sent, now)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return s.readErr(ctx, "ping "+id.String(), err)
		}
		st, err := s.finalState(ctx, c, id)
		if err != nil {
			return err
		}
		if st != store.LeaseActive {
			return &store.LeaseLostError{Lease: id, State: st}
		}
		// Active after all: a concurrent ping extended it between our
		// UPDATE and the look. Ping again.
		if attempt >= maxPingRetries {
			return store.Retriable(fmt.Errorf("postgres store: ping %s: found expired %d times but active", id, attempt+1))
		}
	}
}

// AbortLease ends the lease and returns once every commit that saw it
// active has finished (see the barrier above). Aborting an ended or unknown
// lease succeeds. An active lease whose time has run out becomes Expired
// rather than Aborted.
func (s *Store) AbortLease(ctx context.Context, id store.LeaseID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := s.acquire(ctx, "abort lease")
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, s.sql.abortLease, dbLeaseID(id), s.nowParam()); err != nil {
		return s.readErr(ctx, "abort "+id.String(), err)
	}
	return s.barrier(ctx, c, id)
}

// LeaseState reports the lease's state. A lease whose time has run out is
// ended (Expired) before it is reported, and an ended state is reported
// only after the barrier: LeaseExpired and LeaseAborted carry AbortLease's
// guarantee.
func (s *Store) LeaseState(ctx context.Context, id store.LeaseID) (store.LeaseState, error) {
	if err := ctx.Err(); err != nil {
		return store.LeaseUnknown, err
	}
	c, err := s.acquire(ctx, "lease state")
	if err != nil {
		return store.LeaseUnknown, err
	}
	defer c.Release()
	return s.finalState(ctx, c, id)
}

// finalState reads the lease's state; an active lease past its expiry is
// moved to Expired first (unless a ping intervenes, then it is active).
// An ended state is returned only after the barrier.
func (s *Store) finalState(ctx context.Context, c *pgxpool.Conn, id store.LeaseID) (store.LeaseState, error) {
	for {
		var state int16
		var expired bool
		var now int64
		err := c.QueryRow(ctx, s.sql.observeLease, dbLeaseID(id), s.nowParam()).Scan(&state, &expired, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.LeaseUnknown, nil
		}
		if err != nil {
			return store.LeaseUnknown, s.readErr(ctx, "lease state of "+id.String(), err)
		}
		switch {
		case state == stateActive && !expired:
			return store.LeaseActive, nil
		case state == stateActive:
			// Time ran out: end it. The UPDATE re-checks the expiry on the
			// latest row, so a ping that committed meanwhile wins; either
			// way, look again.
			if _, err := c.Exec(ctx, s.sql.expireLease, dbLeaseID(id), s.nowParam()); err != nil {
				return store.LeaseUnknown, s.readErr(ctx, "expire "+id.String(), err)
			}
			continue
		}
		if err := s.barrier(ctx, c, id); err != nil {
			return store.LeaseUnknown, err
		}
		if state == stateAborted {
			return store.LeaseAborted, nil
		}
		return store.LeaseExpired, nil
	}
}

// barrier waits until no commit holds the lease's row: step 2 above.
//
// A commit whose client stopped in the middle of its pipeline (the batch
// was cut mid-write by a stopped or partitioned process) leaves a server
// session holding the row lock while it waits for the rest, forever if
// the socket stays open. After StalledCommitTimeout the barrier terminates
// such sessions (endStalled): their transactions never reached their
// Sync, so they roll back, and the barrier passes.
func (s *Store) barrier(ctx context.Context, c *pgxpool.Conn, id store.LeaseID) error {
	pid := c.Conn().PgConn().PID()
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.endStalledBlockers(ctx, pid, done)
	}()
	_, err := c.Exec(ctx, s.sql.barrier, dbLeaseID(id))
	close(done)
	<-watched
	if err != nil {
		return s.readErr(ctx, "barrier of "+id.String(), err)
	}
	return nil
}

// endStalledBlockers terminates, every half StalledCommitTimeout until done
// is closed, the stalled sessions blocking the session pid.
func (s *Store) endStalledBlockers(ctx context.Context, pid uint32, done <-chan struct{}) {
	t := time.NewTimer(s.stalled)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Best effort: a failure is retried at the next tick.
		var n int
		_ = s.pool.QueryRow(ctx, s.sql.endStalled, int32(pid), s.stalled.Seconds()).Scan(&n)
		s.stallChecks.Add(1)
		t.Reset(s.stalled / 2)
	}
}
