package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// testTimestamps: Timestamp strictly increases, is never behind the store's
// clock's second when the clock moves forward, and keeps increasing when the
// clock goes back.
func testTimestamps(t *testing.T, h Harness) {
	s, clk := open(t, h)
	prev := timestamp(t, s)
	next := func(what string) store.Timestamp {
		t.Helper()
		ts := timestamp(t, s)
		if ts <= prev {
			t.Fatalf("%s: Timestamp %d after %d: not strictly increasing", what, ts, prev)
		}
		prev = ts
		return ts
	}
	for range 1000 {
		next("same second")
	}
	for range 3 {
		clk.Advance(time.Hour)
		if ts := next("clock forward"); ts < store.MakeTimestamp(clk.Now()) {
			t.Errorf("Timestamp %d (%v) is behind the clock %v", ts, ts.Time(), clk.Now())
		}
	}
	clk.Set(startTime.Add(-24 * time.Hour))
	for range 100 {
		next("clock back")
	}
}

// testTimestampsConcurrent: concurrent Timestamp calls never return the same
// value twice and each caller sees its own values strictly increase.
func testTimestampsConcurrent(t *testing.T, h Harness) {
	s, clk := open(t, h)
	const workers, each = 8, 200
	results := make([][]store.Timestamp, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w == 0 && i%50 == 0 {
					clk.Advance(time.Second)
				}
				ts, err := s.Timestamp(ctxBackground)
				if err != nil {
					t.Errorf("Timestamp: %v", err)
					return
				}
				results[w] = append(results[w], ts)
			}
		}()
	}
	wg.Wait()
	seen := map[store.Timestamp]int{}
	for w, tss := range results {
		for i, ts := range tss {
			if i > 0 && ts <= tss[i-1] {
				t.Errorf("worker %d: Timestamp %d after %d", w, ts, tss[i-1])
			}
			if other, dup := seen[ts]; dup {
				t.Errorf("Timestamp %d issued to workers %d and %d", ts, other, w)
			}
			seen[ts] = w
		}
	}
}

// testClosed: after Close every call fails with store.ErrClosed (a second
// Close may also return nil).
func testClosed(t *testing.T, h Harness) {
	s, _ := open(t, h)
	l := createLease(t, s, time.Hour)
	put(t, s, tMain, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	wantClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want store.ErrClosed", what, err)
		}
	}
	_, _, err := s.Get(ctx, tMain, []byte("k"))
	wantClosed("Get", err)
	wantClosed("Scan", s.Scan(ctx, store.Range{Table: tMain}, func(k, v []byte) bool { return true }))
	txn := store.NewTxn()
	txn.Put(tMain, []byte("k2"), []byte("v"))
	wantClosed("Commit", s.Commit(ctx, txn))
	_, err = s.CreateLease(ctx, time.Hour)
	wantClosed("CreateLease", err)
	wantClosed("PingLease", s.PingLease(ctx, l))
	wantClosed("AbortLease", s.AbortLease(ctx, l))
	_, err = s.LeaseState(ctx, l)
	wantClosed("LeaseState", err)
	_, err = s.Timestamp(ctx)
	wantClosed("Timestamp", err)
	if err := s.Close(); err != nil {
		wantClosed("Close", err)
	}
}

// testReopenKeepsData: committed puts, overwrites, deletes and range
// deletions survive a close and reopen, twice.
func testReopenKeepsData(t *testing.T, h Harness) {
	needReopen(t, h)
	s, clk := open(t, h)
	fillN(t, s, tMain, 10)
	fillN(t, s, tB, 10)
	put(t, s, tMain, keyN(1), "overwritten")
	txn := store.NewTxn()
	txn.Delete(tMain, []byte(keyN(2)))
	txn.DeleteRange(tMain, []byte(keyN(5)), []byte(keyN(8)))
	txn.DeleteRange(tB, []byte(keyN(3)), nil)
	commit(t, s, txn)
	wantMain := []kv{
		{keyN(0), valueN(0)}, {keyN(1), "overwritten"}, {keyN(3), valueN(3)}, {keyN(4), valueN(4)},
		{keyN(8), valueN(8)}, {keyN(9), valueN(9)},
	}
	wantB := rowsN(0, 3, false)

	s = h.Reopen(t, s, clk)
	wantTable(t, s, tMain, wantMain)
	wantTable(t, s, tB, wantB)

	put(t, s, tB, "after", "reopen")
	wantB = append(wantB, kv{"after", "reopen"})
	s = h.Reopen(t, s, clk)
	wantTable(t, s, tMain, wantMain)
	wantTable(t, s, tB, wantB)
}

// testReopenTimestamps: timestamps keep strictly increasing across reopens,
// even when the clock is moved back before the reopen.
func testReopenTimestamps(t *testing.T, h Harness) {
	needReopen(t, h)
	s, clk := open(t, h)
	var prev store.Timestamp
	for round := range 3 {
		for i := range 50 {
			ts := timestamp(t, s)
			if ts <= prev {
				t.Fatalf("round %d, call %d: Timestamp %d after %d", round, i, ts, prev)
			}
			prev = ts
		}
		clk.Set(clk.Now().Add(-time.Hour))
		s = h.Reopen(t, s, clk)
	}
	if ts := timestamp(t, s); ts <= prev {
		t.Fatalf("after the last reopen: Timestamp %d after %d", ts, prev)
	}
}

// testReopenLeases: lease ids are never reused across reopens; leases of an
// earlier incarnation are not active afterwards (unless the backend keeps
// leases, Harness.PersistentLeases) and commits and pings naming them fail.
func testReopenLeases(t *testing.T, h Harness) {
	needReopen(t, h)
	s, clk := open(t, h)
	seen := map[store.LeaseID]int{}
	var prevIncarnation []store.LeaseID
	for round := range 3 {
		var mine []store.LeaseID
		for range 5 {
			id := createLease(t, s, time.Hour)
			if r, dup := seen[id]; dup {
				t.Fatalf("round %d: CreateLease returned %v, already returned in round %d", round, id, r)
			}
			seen[id] = round
			mine = append(mine, id)
		}
		abortLease(t, s, mine[0])
		for _, old := range prevIncarnation {
			st := leaseState(t, s, old)
			txn := store.NewTxn(old)
			txn.Put(tMain, []byte(fmt.Sprintf("old-%v", old)), []byte("x"))
			err := s.Commit(t.Context(), txn)
			if h.PersistentLeases {
				if old != prevIncarnation[0] && st != store.LeaseActive {
					t.Errorf("round %d: persistent lease %v is %v after reopen", round, old, st)
				}
				continue
			}
			if st == store.LeaseActive {
				t.Errorf("round %d: lease %v of the previous incarnation is active", round, old)
			}
			wantLeaseLost(t, "Commit with a lease of the previous incarnation", err, old)
			wantLeaseLost(t, "PingLease of a lease of the previous incarnation", s.PingLease(t.Context(), old), old)
		}
		prevIncarnation = mine
		s = h.Reopen(t, s, clk)
	}
	if !h.PersistentLeases {
		wantTable(t, s, tMain, nil)
	}
}
