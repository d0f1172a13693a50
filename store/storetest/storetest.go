// Package storetest is the conformance suite of the store contract
// (package store). Every backend runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., Reopen: ...})
//	}
//
// The suite checks the three properties weir's guarantees rest on (atomic
// durable commits; lease checked atomically with the commit; abort and expiry
// as barriers) and the rest of the contract: tables as independent
// namespaces, reads and scans, Txn semantics, checks, invalid input, the error
// vocabulary, timestamps, Close, and durability across a close and reopen.
//
// Time is driven by a clock.Manual handed to the backend: the suite never
// sleeps, except to give a racing commit time to reach a held one when the
// backend cannot tell (CheckRaces without Harness.Waiting). Concurrency is real (goroutines); run it under -race.
//
// What the suite cannot check is crash durability (an fsync that lies, a
// power loss mid-write): that needs a backend-specific fault-injecting
// environment, so each backend adds its own crash tests.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// Harness is how the suite opens stores of a backend.
type Harness struct {
	// Open returns a new, empty store whose clock is clk. The harness must
	// close the store when t ends (t.Cleanup), tolerating a store the test
	// has already closed (Close then returns store.ErrClosed).
	Open func(t *testing.T, clk *clock.Manual) store.Store

	// Reopen closes s, which Open or Reopen returned, and opens the same
	// store again with clock clk, as a process restart would. The returned
	// store is closed at the end of t like one from Open. Nil if the backend
	// cannot reopen; the durability tests are then skipped.
	Reopen func(t *testing.T, s store.Store, clk *clock.Manual) store.Store

	// PersistentLeases says leases survive a reopen (a database-backed
	// store). If false (an embedded store, whose leases die with its process),
	// the suite requires that a lease of an earlier incarnation is not active
	// after a reopen and that commits naming it fail.
	PersistentLeases bool

	// Hold, if set, starts committing txn to s and returns once the commit
	// is in flight: it holds whatever a commit holds until it returns
	// (PostgreSQL: its statements ran in a transaction whose COMMIT is not
	// sent, row locks held, nothing visible; Pebble: its batch waits in the
	// commit pipeline for a WAL sync the harness blocks — Pebble publishes
	// a batch before its sync, so it may be visible already). finish lets
	// the commit complete and returns its error. The suite commits nothing else through Hold while a held
	// commit is in flight. Nil: the races against a commit in flight
	// (CheckRaces) are skipped.
	Hold func(t *testing.T, s store.Store, txn *store.Txn) (finish func() error)

	// Waiting, if set, reports whether some commit to s waits for a lock
	// that another commit holds (the races use it to release a held
	// commit only once the racing one has reached it). Nil: the racing
	// commit is given raceGrace to get there.
	Waiting func(t *testing.T, s store.Store) bool
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Tables", testTables},
		{"GetPutDelete", testGetPutDelete},
		{"DeleteRange", testDeleteRange},
		{"Scan", testScan},
		{"TxnLaterMutationsWin", testTxnLaterMutationsWin},
		{"CommitAtomicWhenCheckFails", testCommitAtomicWhenCheckFails},
		{"Checks", testChecks},
		{"GuardedTxnAppliesOnce", testGuardedTxnAppliesOnce},
		{"ConcurrentCheckedIncrements", testConcurrentCheckedIncrements},
		{"CheckRaces", testCheckRaces},
		{"CheckRaceRounds", testCheckRaceRounds},
		{"InvalidTxn", testInvalidTxn},
		{"CancelledContext", testCancelledContext},
		{"RandomTxnsMatchModel", testRandomTxnsMatchModel},
		{"LeaseLifecycle", testLeaseLifecycle},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseLostCommit", testLeaseLostCommit},
		{"LeaseLostPing", testLeaseLostPing},
		{"LeaseProbe", testLeaseProbe},
		{"AbortBarrier", testAbortBarrier},
		{"ExpiryBarrier", testExpiryBarrier},
		{"ZombieCommits", testZombieCommits},
		{"Timestamps", testTimestamps},
		{"TimestampsConcurrent", testTimestampsConcurrent},
		{"Closed", testClosed},
		{"ReopenKeepsData", testReopenKeepsData},
		{"ReopenTimestamps", testReopenTimestamps},
		{"ReopenLeases", testReopenLeases},
		{"Append", testAppend},
		{"AppendConcurrent", testAppendConcurrent},
		{"AppendLeaseLost", testAppendLeaseLost},
		{"ReopenAppend", testReopenAppend},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// Tables used by the suite. "t" and its look-alikes check that a table's
// range never reaches into another table whose name extends its own.
const (
	tA    store.Table = "t"
	tB    store.Table = "t_b"
	tAx   store.Table = "tx"
	tA0   store.Table = "t0"
	tMain store.Table = "main"
)

// startTime is where every manual clock starts.
var startTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newClock() *clock.Manual { return clock.NewManual(startTime) }

func open(t *testing.T, h Harness) (store.Store, *clock.Manual) {
	t.Helper()
	clk := newClock()
	return h.Open(t, clk), clk
}

func needReopen(t *testing.T, h Harness) {
	t.Helper()
	if h.Reopen == nil {
		t.Skip("storetest: backend cannot reopen (Harness.Reopen is nil)")
	}
}

// kv is one row.
type kv struct{ k, v string }

func (r kv) String() string { return fmt.Sprintf("%q=%q", r.k, r.v) }

func commit(t *testing.T, s store.Store, txn *store.Txn) {
	t.Helper()
	if err := s.Commit(t.Context(), txn); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func put(t *testing.T, s store.Store, table store.Table, k, v string) {
	t.Helper()
	txn := store.NewTxn()
	txn.Put(table, []byte(k), []byte(v))
	commit(t, s, txn)
}

func get(t *testing.T, s store.Store, table store.Table, k string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(t.Context(), table, []byte(k))
	if err != nil {
		t.Fatalf("Get(%s, %q): %v", table, k, err)
	}
	if !ok && v != nil {
		t.Errorf("Get(%s, %q): not found but returned value %q", table, k, v)
	}
	return string(v), ok
}

func wantGet(t *testing.T, s store.Store, table store.Table, k, want string) {
	t.Helper()
	v, ok := get(t, s, table, k)
	if !ok {
		t.Errorf("Get(%s, %q): absent, want %q", table, k, want)
	} else if v != want {
		t.Errorf("Get(%s, %q) = %q, want %q", table, k, v, want)
	}
}

func wantAbsent(t *testing.T, s store.Store, table store.Table, k string) {
	t.Helper()
	if v, ok := get(t, s, table, k); ok {
		t.Errorf("Get(%s, %q) = %q, want absent", table, k, v)
	}
}

func scan(t *testing.T, s store.Store, r store.Range) []kv {
	t.Helper()
	var rows []kv
	err := s.Scan(t.Context(), r, func(k, v []byte) bool {
		rows = append(rows, kv{string(k), string(v)})
		return true
	})
	if err != nil {
		t.Fatalf("Scan(%+v): %v", r, err)
	}
	return rows
}

func wantRows(t *testing.T, what string, got, want []kv) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 || slices.Equal(got, want) {
		return
	}
	if len(got)+len(want) <= 20 {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
		return
	}
	// Long lists: report the difference only.
	in := func(rows []kv) map[kv]bool {
		m := make(map[kv]bool, len(rows))
		for _, r := range rows {
			m[r] = true
		}
		return m
	}
	gotSet, wantSet := in(got), in(want)
	var missing, extra []kv
	for _, r := range want {
		if !gotSet[r] {
			missing = append(missing, r)
		}
	}
	for _, r := range got {
		if !wantSet[r] {
			extra = append(extra, r)
		}
	}
	limit := func(rows []kv) []kv { return rows[:min(len(rows), 10)] }
	t.Errorf("%s: got %d rows, want %d; missing %d (first %v), unexpected %d (first %v)",
		what, len(got), len(want), len(missing), limit(missing), len(extra), limit(extra))
}

// wantTable compares the whole content of table with want (sorted by key).
func wantTable(t *testing.T, s store.Store, table store.Table, want []kv) {
	t.Helper()
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b kv) int { return bytes.Compare([]byte(a.k), []byte(b.k)) })
	wantRows(t, "content of "+string(table), scan(t, s, store.Range{Table: table}), want)
}

// wantLeaseLost checks every way a caller may recognise a lost lease.
func wantLeaseLost(t *testing.T, what string, err error, id store.LeaseID) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want a lease-lost error for %v", what, id)
		return
	}
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("%s: error %v does not match store.ErrLeaseLost", what, err)
	}
	var lle *store.LeaseLostError
	if !errors.As(err, &lle) {
		t.Errorf("%s: error %v is not a *store.LeaseLostError", what, err)
	} else {
		if lle.Lease != id {
			t.Errorf("%s: LeaseLostError.Lease = %v, want %v", what, lle.Lease, id)
		}
		if lle.State == store.LeaseActive {
			t.Errorf("%s: LeaseLostError.State = active", what)
		}
	}
	if c := store.Classify(err); c != store.ClassLeaseLost {
		t.Errorf("%s: Classify(%v) = %v, want %v", what, err, c, store.ClassLeaseLost)
	}
}

func wantConflict(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want store.ErrConflict", what)
		return
	}
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("%s: error %v does not match store.ErrConflict", what, err)
	}
	if c := store.Classify(err); c != store.ClassRetriable {
		t.Errorf("%s: Classify(%v) = %v, want %v", what, err, c, store.ClassRetriable)
	}
}

func leaseState(t *testing.T, s store.Store, id store.LeaseID) store.LeaseState {
	t.Helper()
	st, err := s.LeaseState(t.Context(), id)
	if err != nil {
		t.Fatalf("LeaseState(%v): %v", id, err)
	}
	return st
}

func wantLeaseState(t *testing.T, s store.Store, id store.LeaseID, want store.LeaseState) {
	t.Helper()
	if st := leaseState(t, s, id); st != want {
		t.Errorf("LeaseState(%v) = %v, want %v", id, st, want)
	}
}

func createLease(t *testing.T, s store.Store, timeout time.Duration) store.LeaseID {
	t.Helper()
	id, err := s.CreateLease(t.Context(), timeout)
	if err != nil {
		t.Fatalf("CreateLease(%v): %v", timeout, err)
	}
	if id == 0 {
		t.Fatalf("CreateLease(%v) returned the zero LeaseID", timeout)
	}
	return id
}

func abortLease(t *testing.T, s store.Store, id store.LeaseID) {
	t.Helper()
	if err := s.AbortLease(t.Context(), id); err != nil {
		t.Fatalf("AbortLease(%v): %v", id, err)
	}
}

func timestamp(t *testing.T, s store.Store) store.Timestamp {
	t.Helper()
	ts, err := s.Timestamp(t.Context())
	if err != nil {
		t.Fatalf("Timestamp: %v", err)
	}
	return ts
}

// unknownLease is an id no backend hands out in these tests.
const unknownLease = store.LeaseID(1<<64 - 77)

// ctxBackground is the context of the suite's worker goroutines; they end
// before their test does, but a plain context keeps a cancelled test from
// turning their expected errors into context errors.
var ctxBackground = context.Background()
