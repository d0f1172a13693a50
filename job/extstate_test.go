package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// The external state buffer of one epoch: reads see the epoch's own
// writes over the committed rows (Get and a Scan across several store
// chunks), deletions hide rows, a commit applies the writes, a row read
// and then written is guarded against a concurrent change (the commit
// fails with ErrConflict and nothing applies), a blind write is not, and
// access outside the computation's declared tables is refused.

var extTable = &externalstate.Table{Name: "t",
	Key:   []spec.Column{{Name: "h", Type: spec.TypeUint64}, {Name: "k", Type: spec.TypeString}},
	Value: []spec.Column{{Name: "n", Type: spec.TypeInt64}}}

func extComp(kind weir.Kind, write bool) *plan.CompPlan {
	return &plan.CompPlan{Name: "C", Code: weir.Computation{Kind: kind},
		ExternalStates: map[string]plan.ExternalAccess{"t": {Table: extTable, Write: write}}}
}

func extRow(h uint64, k string, n int64) map[string]any {
	return map[string]any{"h": h, "k": k, "n": n}
}

func commitExt(t *testing.T, st store.Store, e *externalStates) error {
	t.Helper()
	txn := store.NewTxn()
	e.sync(txn)
	err := st.Commit(context.Background(), txn)
	if err != nil {
		e.commitFailed(err)
		return err
	}
	e.committed()
	return nil
}

func TestExternalStateReadsOwnWritesAndScansMerged(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	e := newExternalStates(st, extComp(weir.KindTransform, true))
	// Committed: h=1, k=000..599 with n=i (several scan chunks).
	const rows = 600
	for i := 0; i < rows; i++ {
		if err := e.put("t", extRow(1, fmt.Sprintf("%03d", i), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := commitExt(t, st, e); err != nil {
		t.Fatal(err)
	}
	// The next epoch: overwrite some, delete some, add some between and
	// after committed rows, including around the chunk boundary.
	for _, i := range []int{0, 255, 256, 599} {
		if err := e.put("t", extRow(1, fmt.Sprintf("%03d", i), -1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 254, 257, 598} {
		if err := e.delete("t", []any{uint64(1), fmt.Sprintf("%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"255a", "999", "0000"} {
		if err := e.put("t", extRow(1, k, 7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.put("t", extRow(2, "x", 9)); err != nil {
		t.Fatal(err)
	}
	// A put with an int key value is the same row as one with uint64.
	if err := e.put("t", map[string]any{"h": 2, "k": "y", "n": 3}); err != nil {
		t.Fatal(err)
	}
	if row, ok, err := e.get(ctx, "t", []any{uint64(2), "y"}); err != nil || !ok || row["n"] != int64(3) {
		t.Fatalf("get own write = %v, %v, %v", row, ok, err)
	}
	if _, ok, err := e.get(ctx, "t", []any{uint64(1), "001"}); err != nil || ok {
		t.Fatalf("get of a row deleted this epoch = %v, %v", ok, err)
	}
	if row, ok, err := e.get(ctx, "t", []any{uint64(1), "300"}); err != nil || !ok || row["n"] != int64(300) {
		t.Fatalf("get committed row = %v, %v, %v", row, ok, err)
	}

	want := map[string]int64{}
	for i := 0; i < rows; i++ {
		want[fmt.Sprintf("1/%03d", i)] = int64(i)
	}
	for _, i := range []int{0, 255, 256, 599} {
		want[fmt.Sprintf("1/%03d", i)] = -1
	}
	for _, i := range []int{1, 254, 257, 598} {
		delete(want, fmt.Sprintf("1/%03d", i))
	}
	for _, k := range []string{"255a", "999", "0000"} {
		want["1/"+k] = 7
	}
	var got []string
	gotN := map[string]int64{}
	if err := e.scan(ctx, "t", []any{uint64(1)}, []any{uint64(2)}, func(r map[string]any) bool {
		k := fmt.Sprintf("%d/%s", r["h"], r["k"])
		got = append(got, k)
		gotN[k] = r["n"].(int64)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scan of h=1 saw %d rows, want %d", len(got), len(want))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("scan out of key order at %d: %s then %s", i, got[i-1], got[i])
		}
	}
	for k, n := range want {
		if gotN[k] != n {
			t.Errorf("scan: row %s has n=%d, want %d", k, gotN[k], n)
		}
	}
	// A scan stops when fn says so.
	n := 0
	if err := e.scan(ctx, "t", nil, nil, func(map[string]any) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Fatalf("stopped scan visited %d rows (%v), want 3", n, err)
	}
	if err := commitExt(t, st, e); err != nil {
		t.Fatal(err)
	}
	count := 0
	if err := externalstate.Scan(ctx, st, "t", nil, nil, 0, func([]byte, map[string]any) (bool, error) { count++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	if count != len(want)+2 {
		t.Fatalf("committed rows = %d, want %d", count, len(want)+2)
	}
}

func TestExternalStateConflictCheck(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	a := newExternalStates(st, extComp(weir.KindTransform, true))
	b := newExternalStates(st, extComp(weir.KindTransform, true))
	if err := a.put("t", extRow(1, "x", 1)); err != nil {
		t.Fatal(err)
	}
	if err := commitExt(t, st, a); err != nil {
		t.Fatal(err)
	}
	// Both read x, both write x+1: the second commit must fail.
	for _, e := range []*externalStates{a, b} {
		row, _, err := e.get(ctx, "t", []any{uint64(1), "x"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.put("t", extRow(1, "x", row["n"].(int64)+1)); err != nil {
			t.Fatal(err)
		}
	}
	// b also read an absent row and writes it: guarded by CheckAbsent.
	if _, ok, err := b.get(ctx, "t", []any{uint64(1), "new"}); err != nil || ok {
		t.Fatal(ok, err)
	}
	if err := b.put("t", extRow(1, "new", 1)); err != nil {
		t.Fatal(err)
	}
	if err := commitExt(t, st, a); err != nil {
		t.Fatal(err)
	}
	if err := commitExt(t, st, b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("racing read-modify-write committed: %v; want ErrConflict", err)
	}
	row, _, _, err := externalstate.Get(ctx, st, "t", mustKey(t, uint64(1), "x"))
	if err != nil || row["n"] != int64(2) {
		t.Fatalf("x = %v (%v), want n=2", row, err)
	}
	if _, _, ok, _ := externalstate.Get(ctx, st, "t", mustKey(t, uint64(1), "new")); ok {
		t.Fatal("the refused commit applied a write")
	}
	// A blind write (no read this epoch) is not guarded.
	c := newExternalStates(st, extComp(weir.KindTransform, true))
	if err := c.put("t", extRow(1, "x", 10)); err != nil {
		t.Fatal(err)
	}
	if err := commitExt(t, st, c); err != nil {
		t.Fatalf("blind write: %v", err)
	}
}

func mustKey(t *testing.T, vals ...any) []byte {
	t.Helper()
	k, err := extTable.FullKey(vals)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestExternalStateAccessRefused(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	cases := []struct {
		name string
		e    *externalStates
		op   func(e *externalStates) error
		want string
	}{
		{"undeclared", newExternalStates(st, extComp(weir.KindTransform, true)),
			func(e *externalStates) error { _, _, err := e.get(ctx, "other", []any{uint64(1), "a"}); return err }, "does not use external state table \"other\""},
		{"joiner-write", newExternalStates(st, extComp(weir.KindTransform, false)),
			func(e *externalStates) error { return e.put("t", extRow(1, "a", 1)) }, "may only read"},
		{"swift-write", newExternalStates(st, extComp(weir.KindSwiftMap, false)),
			func(e *externalStates) error { return e.delete("t", []any{uint64(1), "a"}) }, "SwiftMap and may not write"},
		{"missing-key", newExternalStates(st, extComp(weir.KindTransform, true)),
			func(e *externalStates) error { return e.put("t", map[string]any{"h": uint64(1), "n": int64(1)}) }, "lacks key column k"},
		{"bad-type", newExternalStates(st, extComp(weir.KindTransform, true)),
			func(e *externalStates) error { return e.put("t", map[string]any{"h": "x", "k": "a"}) }, "key column h"},
		{"undeclared-column", newExternalStates(st, extComp(weir.KindTransform, true)),
			func(e *externalStates) error { return e.put("t", map[string]any{"h": uint64(1), "k": "a", "z": 1}) }, "column z is neither"},
		{"short-key", newExternalStates(st, extComp(weir.KindTransform, true)),
			func(e *externalStates) error { _, _, err := e.get(ctx, "t", []any{uint64(1)}); return err }, "want one per key column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.op(c.e)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
			if len(c.e.writes) != 0 {
				t.Fatalf("a refused write was buffered")
			}
		})
	}
}
