package storetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// appended is one row of a sequence as read back.
type appended struct {
	index uint64
	ts    store.Timestamp
	value string
}

func readSeq(t *testing.T, s store.Store, table store.Table, prefix []byte) []appended {
	t.Helper()
	hi := append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	var out []appended
	err := s.Scan(t.Context(), store.Range{Table: table, Lo: prefix, Hi: hi}, func(k, v []byte) bool {
		if len(k) != len(prefix)+8 || !bytes.HasPrefix(k, prefix) || len(v) < 8 {
			t.Errorf("malformed appended row %q=%q", k, v)
			return false
		}
		out = append(out, appended{binary.BigEndian.Uint64(k[len(prefix):]), store.Timestamp(binary.BigEndian.Uint64(v)), string(v[8:])})
		return true
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

// checkDense verifies indexes 0..n-1 in order and strictly increasing timestamps.
func checkDense(t *testing.T, rows []appended, n int) {
	t.Helper()
	if len(rows) != n {
		t.Fatalf("sequence has %d rows, want %d", len(rows), n)
	}
	for i, r := range rows {
		if r.index != uint64(i) {
			t.Fatalf("row %d has index %d: indexes must be dense from 0", i, r.index)
		}
		if i > 0 && r.ts <= rows[i-1].ts {
			t.Fatalf("row %d timestamp %d not above the previous %d", i, r.ts, rows[i-1].ts)
		}
	}
}

// testAppend: appended rows get dense indexes from 0 in order, strictly
// increasing timestamps; sequences are independent; a Txn's appends keep
// their order and commit atomically with its other writes.
func testAppend(t *testing.T, h Harness) {
	s, _ := open(t, h)
	p1, p2 := []byte("q\x00\x00\x00\x00\x01"), []byte("q\x00\x00\x00\x00\x02")
	txn := store.NewTxn()
	txn.Append(tA, p1, []byte("a"), []byte("b"))
	txn.Append(tA, p2, []byte("x"))
	txn.Put(tB, []byte("k"), []byte("v"))
	commit(t, s, txn)
	txn = store.NewTxn()
	txn.Append(tA, p1, []byte("c"))
	commit(t, s, txn)
	r1 := readSeq(t, s, tA, p1)
	checkDense(t, r1, 3)
	if r1[0].value != "a" || r1[1].value != "b" || r1[2].value != "c" {
		t.Fatalf("sequence values %v, want a b c", r1)
	}
	checkDense(t, readSeq(t, s, tA, p2), 1)
	// A failing check leaves no appended row and consumes no index.
	txn = store.NewTxn()
	txn.CheckAbsent(tB, []byte("k"))
	txn.Append(tA, p1, []byte("never"))
	if err := s.Commit(t.Context(), txn); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Commit with failing check = %v, want ErrConflict", err)
	}
	txn = store.NewTxn()
	txn.Append(tA, p1, []byte("d"))
	commit(t, s, txn)
	r1 = readSeq(t, s, tA, p1)
	checkDense(t, r1, 4)
	if r1[3].value != "d" {
		t.Fatalf("row 3 = %q, want d", r1[3].value)
	}
}

// testAppendConcurrent: concurrent commits appending to one sequence give
// dense indexes and increasing timestamps, each commit's rows contiguous.
func testAppendConcurrent(t *testing.T, h Harness) {
	s, _ := open(t, h)
	p := []byte("conc")
	const writers, perWriter, rowsPer = 8, 20, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				txn := store.NewTxn()
				for r := 0; r < rowsPer; r++ {
					txn.Append(tA, p, []byte(fmt.Sprintf("%d/%d/%d", w, i, r)))
				}
				if err := s.Commit(t.Context(), txn); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Commit: %v", err)
	}
	rows := readSeq(t, s, tA, p)
	checkDense(t, rows, writers*perWriter*rowsPer)
	for i := 0; i < len(rows); i += rowsPer {
		var w, n, r int
		fmt.Sscanf(rows[i].value, "%d/%d/%d", &w, &n, &r)
		for j := 0; j < rowsPer; j++ {
			if want := fmt.Sprintf("%d/%d/%d", w, n, j); rows[i+j].value != want {
				t.Fatalf("row %d = %q, want %q: a commit's rows must be contiguous and in order", i+j, rows[i+j].value, want)
			}
		}
	}
}

// testAppendLeaseLost: an append under an ended lease writes nothing and
// consumes no index.
func testAppendLeaseLost(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	p := []byte("fenced")
	l, err := s.CreateLease(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn(l)
	txn.Append(tA, p, []byte("0"))
	commit(t, s, txn)
	if err := s.AbortLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	txn = store.NewTxn(l)
	txn.Append(tA, p, []byte("zombie"))
	if err := s.Commit(ctx, txn); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("zombie append = %v, want lease lost", err)
	}
	txn = store.NewTxn()
	txn.Append(tA, p, []byte("1"))
	commit(t, s, txn)
	rows := readSeq(t, s, tA, p)
	checkDense(t, rows, 2)
	if rows[1].value != "1" {
		t.Fatalf("row 1 = %q, want 1", rows[1].value)
	}
}

// testReopenAppend: after a reopen a sequence continues at its tail, with
// timestamps above the ones issued before.
func testReopenAppend(t *testing.T, h Harness) {
	needReopen(t, h)
	s, clk := open(t, h)
	p := []byte("reopen")
	txn := store.NewTxn()
	txn.Append(tA, p, []byte("a"), []byte("b"))
	commit(t, s, txn)
	clk.Set(startTime.Add(-time.Hour)) // the clock going back must not matter
	s = h.Reopen(t, s, clk)
	txn = store.NewTxn()
	txn.Append(tA, p, []byte("c"))
	commit(t, s, txn)
	checkDense(t, readSeq(t, s, tA, p), 3)
}
