package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// testLeaseLifecycle: CreateLease gives distinct non-zero active leases;
// AbortLease ends a lease and is idempotent (also on unknown ids and the zero
// id); ended states are final; LeaseState of an unknown id is LeaseUnknown;
// a non-positive timeout is rejected.
func testLeaseLifecycle(t *testing.T, h Harness) {
	s, clk := open(t, h)
	ids := map[store.LeaseID]bool{}
	for range 20 {
		id := createLease(t, s, time.Minute)
		if ids[id] {
			t.Fatalf("CreateLease returned %v twice", id)
		}
		ids[id] = true
		wantLeaseState(t, s, id, store.LeaseActive)
	}

	l := createLease(t, s, time.Minute)
	abortLease(t, s, l)
	wantLeaseState(t, s, l, store.LeaseAborted)
	abortLease(t, s, l)
	wantLeaseState(t, s, l, store.LeaseAborted)
	// Final: time passing or a ping does not change an aborted lease.
	clk.Advance(time.Hour)
	_ = s.PingLease(t.Context(), l)
	wantLeaseState(t, s, l, store.LeaseAborted)

	wantLeaseState(t, s, unknownLease, store.LeaseUnknown)
	wantLeaseState(t, s, 0, store.LeaseUnknown)
	abortLease(t, s, unknownLease)
	abortLease(t, s, 0)
	wantLeaseState(t, s, unknownLease, store.LeaseUnknown)

	for _, timeout := range []time.Duration{0, -time.Second} {
		if id, err := s.CreateLease(t.Context(), timeout); err == nil {
			t.Errorf("CreateLease(%v) = %v, want an error", timeout, id)
		}
	}
}

// testLeaseExpiry: a lease expires when not pinged within its timeout
// (lastPing + timeout <= now), by the store's clock; PingLease extends it;
// expiry is final (moving the clock back does not revive it); aborting an
// expired lease succeeds and leaves it ended.
func testLeaseExpiry(t *testing.T, h Harness) {
	s, clk := open(t, h)
	const timeout = 10 * time.Second
	l := createLease(t, s, timeout)
	other := createLease(t, s, timeout)

	clk.Advance(timeout - time.Nanosecond)
	wantLeaseState(t, s, l, store.LeaseActive)
	if err := s.PingLease(t.Context(), l); err != nil {
		t.Fatalf("PingLease of an active lease: %v", err)
	}
	// Now other has run out its timeout exactly; l was pinged.
	clk.Advance(time.Nanosecond)
	wantLeaseState(t, s, other, store.LeaseExpired)
	wantLeaseState(t, s, l, store.LeaseActive)
	clk.Advance(timeout - 2*time.Nanosecond)
	wantLeaseState(t, s, l, store.LeaseActive)
	clk.Advance(time.Nanosecond)
	wantLeaseState(t, s, l, store.LeaseExpired)

	// Final even if the clock goes back.
	clk.Set(startTime)
	wantLeaseState(t, s, l, store.LeaseExpired)
	wantLeaseLost(t, "PingLease of an expired lease", s.PingLease(t.Context(), l), l)
	abortLease(t, s, l)
	if st := leaseState(t, s, l); st == store.LeaseActive || st == store.LeaseUnknown {
		t.Errorf("LeaseState after aborting an expired lease = %v, want expired or aborted", st)
	}

	// Pinging regularly keeps a lease alive indefinitely.
	k := createLease(t, s, timeout)
	for range 10 {
		clk.Advance(timeout - time.Second)
		if err := s.PingLease(t.Context(), k); err != nil {
			t.Fatalf("PingLease: %v", err)
		}
	}
	wantLeaseState(t, s, k, store.LeaseActive)

	// An expired lease is detected by a commit too, without a LeaseState call.
	m := createLease(t, s, timeout)
	clk.Advance(timeout)
	txn := store.NewTxn(m)
	txn.Put(tMain, []byte("k"), []byte("v"))
	wantLeaseLost(t, "Commit with an expired lease", s.Commit(t.Context(), txn), m)
	wantAbsent(t, s, tMain, "k")
	wantLeaseState(t, s, m, store.LeaseExpired)
}

// testLeaseLostCommit: a Commit naming an aborted, expired or unknown lease
// fails with a lease-lost error (errors.Is ErrLeaseLost, errors.As
// *LeaseLostError naming that lease, ClassLeaseLost) and writes nothing; so
// does one naming an active and a lost lease; a lost lease wins over a
// failing check.
func testLeaseLostCommit(t *testing.T, h Harness) {
	s, clk := open(t, h)
	active := createLease(t, s, time.Hour)
	aborted := createLease(t, s, time.Hour)
	abortLease(t, s, aborted)
	expired := createLease(t, s, time.Minute)
	clk.Advance(30 * time.Minute)
	if err := s.PingLease(t.Context(), active); err != nil {
		t.Fatal(err)
	}

	txn := store.NewTxn(active)
	txn.Put(tMain, []byte("ok"), []byte("1"))
	commit(t, s, txn)
	wantGet(t, s, tMain, "ok", "1")

	cases := []struct {
		name string
		pre  []store.LeaseID
		lost store.LeaseID
	}{
		{"aborted", []store.LeaseID{aborted}, aborted},
		{"expired", []store.LeaseID{expired}, expired},
		{"unknown", []store.LeaseID{unknownLease}, unknownLease},
		{"active-and-aborted", []store.LeaseID{active, aborted}, aborted},
		{"aborted-and-active", []store.LeaseID{aborted, active}, aborted},
	}
	for _, c := range cases {
		txn := store.NewTxn(c.pre...)
		txn.Put(tMain, []byte("lost"), []byte(c.name))
		txn.Put(tB, []byte("lost"), []byte(c.name))
		txn.Delete(tMain, []byte("ok"))
		wantLeaseLost(t, "Commit with "+c.name+" lease", s.Commit(t.Context(), txn), c.lost)
	}

	// A lost lease wins over a failing check: the holder must stop.
	txn = store.NewTxn(aborted)
	txn.CheckValue(tMain, []byte("ok"), []byte("wrong"))
	txn.Put(tMain, []byte("lost"), []byte("check"))
	wantLeaseLost(t, "Commit with an aborted lease and a failing check", s.Commit(t.Context(), txn), aborted)

	wantTable(t, s, tMain, []kv{{"ok", "1"}})
	wantTable(t, s, tB, nil)

	// The same lease named twice is fine.
	txn = store.NewTxn(active, active)
	txn.Put(tMain, []byte("twice"), []byte("1"))
	commit(t, s, txn)
}

// testLeaseLostPing: PingLease of an aborted, expired or unknown lease fails
// with the same lease-lost error as a commit.
func testLeaseLostPing(t *testing.T, h Harness) {
	s, clk := open(t, h)
	aborted := createLease(t, s, time.Hour)
	abortLease(t, s, aborted)
	expired := createLease(t, s, time.Minute)
	clk.Advance(time.Minute)
	wantLeaseLost(t, "PingLease of an aborted lease", s.PingLease(t.Context(), aborted), aborted)
	wantLeaseLost(t, "PingLease of an expired lease", s.PingLease(t.Context(), expired), expired)
	wantLeaseLost(t, "PingLease of an unknown lease", s.PingLease(t.Context(), unknownLease), unknownLease)
	wantLeaseState(t, s, aborted, store.LeaseAborted)
	wantLeaseState(t, s, expired, store.LeaseExpired)
}

// testLeaseProbe: an empty Txn with prerequisites probes the leases: it
// succeeds while they are active and fails with a lease-lost error once one
// is aborted or expired. An empty Txn without prerequisites succeeds.
func testLeaseProbe(t *testing.T, h Harness) {
	s, clk := open(t, h)
	if err := s.Commit(t.Context(), store.NewTxn()); err != nil {
		t.Errorf("Commit of an empty Txn: %v", err)
	}
	a := createLease(t, s, time.Hour)
	b := createLease(t, s, time.Minute)
	if err := s.Commit(t.Context(), store.NewTxn(a, b)); err != nil {
		t.Errorf("lease probe of active leases: %v", err)
	}
	clk.Advance(time.Minute)
	wantLeaseLost(t, "lease probe of an expired lease", s.Commit(t.Context(), store.NewTxn(a, b)), b)
	if err := s.Commit(t.Context(), store.NewTxn(a)); err != nil {
		t.Errorf("lease probe of an active lease: %v", err)
	}
	abortLease(t, s, a)
	wantLeaseLost(t, "lease probe of an aborted lease", s.Commit(t.Context(), store.NewTxn(a)), a)
	wantLeaseLost(t, "lease probe of an unknown lease", s.Commit(t.Context(), store.NewTxn(unknownLease)), unknownLease)
}

// barrierIterations is how many races each barrier test runs.
const barrierIterations = 10

// testAbortBarrier: AbortLease is a barrier. Committers race to commit with a
// lease while it is aborted; no commit that started after AbortLease returned
// succeeds, the table holds the same rows right after AbortLease returned as
// at the end (no write lands after the barrier), and it holds exactly the
// rows whose commits reported success.
func testAbortBarrier(t *testing.T, h Harness) {
	s, _ := open(t, h)
	for iter := range barrierIterations {
		raceLeaseEnd(t, s, iter, time.Hour, func(l store.LeaseID) {
			abortLease(t, s, l)
		})
	}
}

// testExpiryBarrier: expiry is the same barrier as AbortLease. The clock
// moves past the lease's timeout while committers race; once LeaseState has
// reported LeaseExpired, the same conditions as in testAbortBarrier hold.
func testExpiryBarrier(t *testing.T, h Harness) {
	s, clk := open(t, h)
	const timeout = 10 * time.Second
	for iter := range barrierIterations {
		raceLeaseEnd(t, s, iter, timeout, func(l store.LeaseID) {
			clk.Advance(timeout)
			wantLeaseState(t, s, l, store.LeaseExpired)
		})
	}
}

// raceLeaseEnd runs committers with a fresh lease and calls end(lease) after
// a few of their commits succeeded; see testAbortBarrier for what it checks.
func raceLeaseEnd(t *testing.T, s store.Store, iter int, timeout time.Duration, end func(store.LeaseID)) {
	t.Helper()
	const committers = 8
	table := tMain
	prefix := fmt.Sprintf("i%03d-", iter)
	l := createLease(t, s, timeout)

	var (
		ended       atomic.Bool
		lateSuccess atomic.Int64
		successes   atomic.Int64
		mu          sync.Mutex
		acked       []kv
		failures    []string
		wg          sync.WaitGroup
	)
	target := int64(iter % 5) // successes to wait for before ending the lease
	reached := make(chan struct{})
	var reachedOnce sync.Once
	if target == 0 {
		reachedOnce.Do(func() { close(reached) })
	}
	allDone := make(chan struct{})
	for g := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := fmt.Sprintf("%sg%02d-%06d", prefix, g, i)
				startedAfterEnd := ended.Load()
				txn := store.NewTxn(l)
				txn.Put(table, []byte(k), []byte(k))
				err := s.Commit(ctxBackground, txn)
				if err == nil {
					if startedAfterEnd {
						lateSuccess.Add(1)
					}
					mu.Lock()
					acked = append(acked, kv{k, k})
					mu.Unlock()
					if successes.Add(1) == target {
						reachedOnce.Do(func() { close(reached) })
					}
					continue
				}
				if !errors.Is(err, store.ErrLeaseLost) || store.Classify(err) != store.ClassLeaseLost {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("commit %s: unexpected error %v", k, err))
					mu.Unlock()
				}
				return
			}
		}()
	}
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-reached:
	case <-allDone:
	}
	end(l)
	ended.Store(true)
	atEnd := scan(t, s, store.Range{Table: table, Lo: []byte(prefix), Hi: []byte(prefix + "\xff")})
	<-allDone

	for _, f := range failures {
		t.Error(f)
	}
	if n := lateSuccess.Load(); n != 0 {
		t.Errorf("iteration %d: %d commits that started after the lease ended succeeded", iter, n)
	}
	final := scan(t, s, store.Range{Table: table, Lo: []byte(prefix), Hi: []byte(prefix + "\xff")})
	wantRows(t, fmt.Sprintf("iteration %d: rows at the end vs right after the lease ended", iter), final, atEnd)
	slices.SortFunc(acked, func(a, b kv) int {
		if a.k < b.k {
			return -1
		}
		if a.k > b.k {
			return 1
		}
		return 0
	})
	wantRows(t, fmt.Sprintf("iteration %d: rows vs acknowledged commits", iter), final, acked)
}
