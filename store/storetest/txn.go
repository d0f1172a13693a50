package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/weir-stream/weir/store"
)

// testTxnLaterMutationsWin: within one Txn, mutations apply in order, so the
// last one on a key decides (Put/Put, Put/Delete, Delete/Put, Put then a
// covering DeleteRange, DeleteRange then Put).
func testTxnLaterMutationsWin(t *testing.T, h Harness) {
	s, _ := open(t, h)
	put(t, s, tMain, "c", "old")
	put(t, s, tMain, "r1", "old")
	put(t, s, tMain, "r2", "old")
	put(t, s, tMain, "r3", "old")

	txn := store.NewTxn()
	txn.Put(tMain, []byte("a"), []byte("1"))
	txn.Put(tMain, []byte("a"), []byte("2"))
	txn.Put(tMain, []byte("b"), []byte("1"))
	txn.Delete(tMain, []byte("b"))
	txn.Delete(tMain, []byte("c"))
	txn.Put(tMain, []byte("c"), []byte("new"))
	txn.Put(tMain, []byte("d"), []byte("1"))
	txn.DeleteRange(tMain, []byte("d"), []byte("e"))
	txn.DeleteRange(tMain, []byte("r"), []byte("s"))
	txn.Put(tMain, []byte("r2"), []byte("new"))
	commit(t, s, txn)
	wantTable(t, s, tMain, []kv{{"a", "2"}, {"c", "new"}, {"r2", "new"}})
}

// testCommitAtomicWhenCheckFails: a Txn whose check fails writes none of its
// puts, deletes or range deletions, in any table, and fails with
// store.ErrConflict (ClassRetriable).
func testCommitAtomicWhenCheckFails(t *testing.T, h Harness) {
	s, _ := open(t, h)
	put(t, s, tMain, "x", "1")
	fillN(t, s, tB, 5)

	txn := store.NewTxn()
	txn.Put(tMain, []byte("a"), []byte("1"))
	txn.Put(tB, []byte("b"), []byte("1"))
	txn.Delete(tB, []byte(keyN(0)))
	txn.DeleteRange(tB, []byte(keyN(2)), nil)
	txn.Put(tMain, []byte("x"), []byte("3"))
	txn.CheckValue(tMain, []byte("x"), []byte("2"))
	wantConflict(t, "Commit with a failing check", s.Commit(t.Context(), txn))

	wantTable(t, s, tMain, []kv{{"x", "1"}})
	wantTable(t, s, tB, rowsN(0, 5, false))
}

// testChecks: CheckValue and CheckAbsent semantics, including empty values
// (an empty value is present, not absent), several checks, checks without
// mutations, check-and-set, and that checks are per table.
func testChecks(t *testing.T, h Harness) {
	s, _ := open(t, h)
	put(t, s, tMain, "one", "1")
	put(t, s, tMain, "empty", "")

	type check struct {
		key, value string
		absent     bool
	}
	cases := []struct {
		name   string
		checks []check
		ok     bool
	}{
		{"absent-on-absent", []check{{key: "none", absent: true}}, true},
		{"absent-on-present", []check{{key: "one", absent: true}}, false},
		{"absent-on-empty-value", []check{{key: "empty", absent: true}}, false},
		{"value-equal", []check{{key: "one", value: "1"}}, true},
		{"value-different", []check{{key: "one", value: "2"}}, false},
		{"value-prefix", []check{{key: "one", value: "10"}}, false},
		{"value-on-absent", []check{{key: "none", value: "1"}}, false},
		{"empty-value-on-absent", []check{{key: "none", value: ""}}, false},
		{"empty-value-on-empty", []check{{key: "empty", value: ""}}, true},
		{"all-hold", []check{{key: "one", value: "1"}, {key: "none", absent: true}, {key: "empty", value: ""}}, true},
		{"one-fails", []check{{key: "one", value: "1"}, {key: "none", absent: true}, {key: "empty", absent: true}}, false},
	}
	for i, c := range cases {
		for _, withWrite := range []bool{true, false} {
			txn := store.NewTxn()
			for _, ch := range c.checks {
				if ch.absent {
					txn.CheckAbsent(tMain, []byte(ch.key))
				} else {
					txn.CheckValue(tMain, []byte(ch.key), []byte(ch.value))
				}
			}
			marker := fmt.Sprintf("marker-%02d", i)
			if withWrite {
				txn.Put(tB, []byte(marker), []byte("x"))
			}
			err := s.Commit(t.Context(), txn)
			what := fmt.Sprintf("%s (with write %v)", c.name, withWrite)
			if c.ok {
				if err != nil {
					t.Errorf("%s: Commit: %v, want success", what, err)
				}
				if withWrite {
					wantGet(t, s, tB, marker, "x")
				}
			} else {
				wantConflict(t, what, err)
				wantAbsent(t, s, tB, marker)
			}
			if withWrite && c.ok {
				txn := store.NewTxn()
				txn.Delete(tB, []byte(marker))
				commit(t, s, txn)
			}
		}
	}

	// Check-and-set: the check sees the value committed before the Txn, not
	// the Txn's own write.
	cas := func() error {
		txn := store.NewTxn()
		txn.CheckAbsent(tMain, []byte("cas"))
		txn.Put(tMain, []byte("cas"), []byte("first"))
		return s.Commit(t.Context(), txn)
	}
	if err := cas(); err != nil {
		t.Fatalf("first check-and-set: %v", err)
	}
	wantConflict(t, "second check-and-set", cas())
	wantGet(t, s, tMain, "cas", "first")

	// Checks are per table: "one" exists in main, not in t_b.
	txn := store.NewTxn()
	txn.CheckAbsent(tB, []byte("one"))
	commit(t, s, txn)
}

// testConcurrentCheckedIncrements: concurrent read-check-write increments of
// one counter, retried on store.ErrConflict, lose no update: checks are
// atomic with their writes.
func testConcurrentCheckedIncrements(t *testing.T, h Harness) {
	s, _ := open(t, h)
	const workers, each = 4, 20
	key := []byte("counter")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < each; {
				v, ok, err := s.Get(t.Context(), tMain, key)
				if err != nil {
					errs <- err
					return
				}
				n := 0
				txn := store.NewTxn()
				if ok {
					if n, err = strconv.Atoi(string(v)); err != nil {
						errs <- err
						return
					}
					txn.CheckValue(tMain, key, v)
				} else {
					txn.CheckAbsent(tMain, key)
				}
				txn.Put(tMain, key, []byte(strconv.Itoa(n+1)))
				err = s.Commit(t.Context(), txn)
				switch {
				case err == nil:
					done++
				case errors.Is(err, store.ErrConflict):
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("increment: %v", err)
	}
	wantGet(t, s, tMain, "counter", strconv.Itoa(workers*each))
}

// testInvalidTxn: malformed Txns are rejected with a ClassFatal error and
// write nothing, not even their valid mutations.
func testInvalidTxn(t *testing.T, h Harness) {
	s, _ := open(t, h)
	long := store.Table(strings.Repeat("a", 65))
	cases := []struct {
		name  string
		build func(txn *store.Txn)
	}{
		{"empty-table-name", func(txn *store.Txn) { txn.Put("", []byte("k"), []byte("v")) }},
		{"uppercase-table-name", func(txn *store.Txn) { txn.Put("Main", []byte("k"), []byte("v")) }},
		{"dash-table-name", func(txn *store.Txn) { txn.Put("a-b", []byte("k"), []byte("v")) }},
		{"nul-table-name", func(txn *store.Txn) { txn.Put("a\x00b", []byte("k"), []byte("v")) }},
		{"long-table-name", func(txn *store.Txn) { txn.Put(long, []byte("k"), []byte("v")) }},
		{"empty-key-put", func(txn *store.Txn) { txn.Put(tMain, nil, []byte("v")) }},
		{"empty-key-delete", func(txn *store.Txn) { txn.Delete(tMain, []byte{}) }},
		{"bad-table-delete-range", func(txn *store.Txn) { txn.DeleteRange("B", nil, nil) }},
		{"inverted-range", func(txn *store.Txn) { txn.DeleteRange(tMain, []byte("b"), []byte("a")) }},
		{"empty-key-check", func(txn *store.Txn) { txn.CheckAbsent(tMain, nil) }},
		{"bad-table-check", func(txn *store.Txn) { txn.CheckValue("X", []byte("k"), nil) }},
	}
	put(t, s, tMain, "keep", "1")
	for _, c := range cases {
		txn := store.NewTxn()
		txn.Put(tMain, []byte("marker"), []byte(c.name))
		txn.Delete(tMain, []byte("keep"))
		c.build(txn)
		err := s.Commit(t.Context(), txn)
		if err == nil {
			t.Errorf("%s: Commit succeeded", c.name)
		} else if cl := store.Classify(err); cl != store.ClassFatal {
			t.Errorf("%s: Classify(%v) = %v, want %v", c.name, err, cl, store.ClassFatal)
		}
	}
	wantTable(t, s, tMain, []kv{{"keep", "1"}})
}

// testCancelledContext: a Commit with a cancelled context fails; unless the
// backend reports the outcome as ambiguous, it wrote nothing.
func testCancelledContext(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	txn := store.NewTxn()
	txn.Put(tMain, []byte("k"), []byte("v"))
	err := s.Commit(ctx, txn)
	if err == nil {
		t.Fatal("Commit with a cancelled context succeeded")
	}
	if store.Classify(err) != store.ClassAmbiguous {
		wantAbsent(t, s, tMain, "k")
	}
}

// testRandomTxnsMatchModel: random multi-mutation Txns (puts, deletes, range
// deletions with and without bounds, over two tables and a small key space)
// leave the store equal to a simple in-memory model. With a reopen halfway,
// when the backend can.
func testRandomTxnsMatchModel(t *testing.T, h Harness) {
	s, clk := open(t, h)
	rng := rand.New(rand.NewPCG(1, 2))
	tables := []store.Table{tMain, tB}
	model := map[store.Table]map[string]string{tMain: {}, tB: {}}
	key := func() []byte { return []byte{byte('a' + rng.IntN(12)), byte('0' + rng.IntN(3))} }
	const txns = 150
	for i := range txns {
		if i == txns/2 && h.Reopen != nil {
			s = h.Reopen(t, s, clk)
		}
		txn := store.NewTxn()
		for range 1 + rng.IntN(6) {
			tb := tables[rng.IntN(len(tables))]
			m := model[tb]
			switch r := rng.IntN(10); {
			case r < 6:
				k := key()
				v := fmt.Sprintf("v%d-%d", i, rng.IntN(1000))
				txn.Put(tb, k, []byte(v))
				m[string(k)] = v
			case r < 8:
				k := key()
				txn.Delete(tb, k)
				delete(m, string(k))
			default:
				var lo, hi []byte
				if rng.IntN(4) > 0 {
					lo = key()
				}
				if rng.IntN(4) > 0 {
					hi = key()
				}
				if lo != nil && hi != nil && bytes.Compare(lo, hi) > 0 {
					lo, hi = hi, lo
				}
				txn.DeleteRange(tb, lo, hi)
				for k := range m {
					if bytes.Compare([]byte(k), lo) >= 0 && (hi == nil || bytes.Compare([]byte(k), hi) < 0) {
						delete(m, k)
					}
				}
			}
		}
		commit(t, s, txn)
	}
	for _, tb := range tables {
		var want []kv
		for k, v := range model[tb] {
			want = append(want, kv{k, v})
		}
		wantTable(t, s, tb, want)
		// Reverse scans agree with forward ones.
		fwd := scan(t, s, store.Range{Table: tb})
		rev := scan(t, s, store.Range{Table: tb, Reverse: true})
		slices.Reverse(rev)
		wantRows(t, "reverse scan of "+string(tb), rev, fwd)
	}
}

// testGuardedTxnAppliesOnce is the contract the engine's epoch commits rely
// on when a commit's outcome is unknown (store.AmbiguousError): an attempt
// may still land after the caller gave up on it, even after later commits
// (a networked store), so every attempt carries a check that the
// partition_transactions row still holds the previous epoch's value and
// writes this epoch's. Evaluated atomically with the commit, that check lets
// at most one attempt of an epoch apply, however late the others land: a
// replayed attempt fails with store.ErrConflict and writes nothing — it
// neither moves the row back nor overwrites what later epochs wrote.
func testGuardedTxnAppliesOnce(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	epoch := func(prev, next, value string) *store.Txn {
		txn := store.NewTxn()
		if prev == "" {
			txn.CheckAbsent(tMain, []byte("row"))
		} else {
			txn.CheckValue(tMain, []byte("row"), []byte(prev))
		}
		txn.Put(tMain, []byte("row"), []byte(next))
		txn.Put(tB, []byte("state"), []byte(value))
		return txn
	}
	e1 := epoch("", "1", "after-epoch-1")
	commit(t, s, e1)
	// The same attempt again (a duplicate that lands late): refused.
	wantConflict(t, "a second landing of epoch 1", s.Commit(ctx, e1))
	e2 := epoch("1", "2", "after-epoch-2")
	commit(t, s, e2)
	// Epoch 1 and epoch 2 landing again after epoch 2: refused, nothing moves back.
	wantConflict(t, "epoch 1 landing after epoch 2", s.Commit(ctx, e1))
	wantConflict(t, "epoch 2 landing again", s.Commit(ctx, e2))
	wantTable(t, s, tMain, []kv{{"row", "2"}})
	wantTable(t, s, tB, []kv{{"state", "after-epoch-2"}})
}
