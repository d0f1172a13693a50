package pebble

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/store"
)

// TestCommitOrderKeepsTheTxnsOutcome: a commit adds its writes to Pebble's
// batch in key order (insertOrder), which must not change what the
// transaction means: of two writes of one key the later wins, and a point
// write keeps its place relative to a range deletion.
func TestCommitOrderKeepsTheTxnsOutcome(t *testing.T) {
	ctx := context.Background()
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const tb = store.States
	commit := func(build func(*store.Txn)) {
		t.Helper()
		txn := store.NewTxn()
		build(txn)
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	get := func(k string) string {
		t.Helper()
		v, ok, err := s.Get(ctx, tb, []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<absent>"
		}
		return string(v)
	}
	commit(func(txn *store.Txn) {
		txn.Put(tb, []byte("k"), []byte("1"))
		txn.Put(tb, []byte("a"), []byte("a"))
		txn.Delete(tb, []byte("k"))
		txn.Put(store.OutputMessages, []byte("z"), []byte("z"))
		txn.Put(tb, []byte("k"), []byte("2"))
		txn.Put(tb, []byte("d"), []byte("d"))
		txn.Delete(tb, []byte("d"))
	})
	for k, want := range map[string]string{"k": "2", "a": "a", "d": "<absent>"} {
		if got := get(k); got != want {
			t.Errorf("after out-of-order writes, %s = %s, want %s", k, got, want)
		}
	}
	// Many writes of one key among others in reverse order: a sort that is
	// not stable would let an earlier write win.
	commit(func(txn *store.Txn) {
		for i := range 200 {
			txn.Put(tb, []byte("many"), []byte(fmt.Sprint(i)))
			txn.Put(tb, []byte(fmt.Sprintf("o%03d", 199-i)), []byte("o"))
		}
	})
	if got := get("many"); got != "199" {
		t.Errorf("after 200 writes of one key, it is %s, want the last, 199", got)
	}
	commit(func(txn *store.Txn) {
		txn.Put(tb, []byte("x"), []byte("before"))
		txn.DeleteRange(tb, []byte("a"), []byte("y"))
		txn.Put(tb, []byte("m"), []byte("after"))
	})
	for k, want := range map[string]string{"x": "<absent>", "m": "after", "k": "<absent>", "a": "<absent>"} {
		if got := get(k); got != want {
			t.Errorf("around a range deletion, %s = %s, want %s", k, got, want)
		}
	}
}

// BenchmarkInsertOrder: ordering an epoch's mutations (1000 scattered state
// rows, then 1000 increasing output rows) for the batch.
func BenchmarkInsertOrder(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var muts []store.Mutation
	for i := range 1000 {
		muts = append(muts, store.Mutation{Kind: store.Put, Table: store.States, Key: fmt.Appendf(nil, "Counter\x00user-%05d", r.IntN(10000)), Value: []byte{byte(i)}})
	}
	for i := range 1000 {
		muts = append(muts, store.Mutation{Kind: store.Put, Table: store.QueueRows, Key: fmt.Appendf(nil, "counts\x00%08d", i), Value: []byte{byte(i)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		insertOrder(muts).release()
	}
}
