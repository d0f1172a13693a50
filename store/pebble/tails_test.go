package pebble

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// TestSequenceEnd: the store publishes each sequence's end
// (store.SequenceTails) once a commit's appends are visible, before the
// commit returns; a waiter's channel closes then, and only for its own
// sequence; a sequence this handle never appended to has its end read from
// the store (after a reopen too); a closed store cannot tell.
func TestSequenceEnd(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	clk := clock.NewManual(clock.Real{}.Now())
	s := openMem(t, fs, clk)
	appendTo := func(s *Store, prefix string, n int) {
		t.Helper()
		txn := store.NewTxn()
		for range n {
			txn.Append(store.QueueRows, []byte(prefix), []byte("v"))
		}
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	end, grew, ok := s.WatchSequence(store.QueueRows, []byte("a"))
	if !ok || end != 0 || grew == nil {
		t.Fatalf("an empty sequence: end %d, ok %v, grew %v", end, ok, grew)
	}
	appendTo(s, "b", 1)
	select {
	case <-grew:
		t.Fatal("an append to b closed a's channel")
	default:
	}
	appendTo(s, "a", 3)
	select {
	case <-grew:
	default:
		t.Fatal("a's channel still open after a commit appended to it returned")
	}
	if end, _ := s.SequenceEnd(store.QueueRows, []byte("a")); end != 3 {
		t.Fatalf("end of a after 3 appends = %d, want 3", end)
	}
	appendTo(s, "c", 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.SequenceEnd(store.QueueRows, []byte("a")); ok {
		t.Fatal("a closed store told a sequence's end")
	}
	s = openMem(t, fs, clk)
	for prefix, want := range map[string]uint64{"a": 3, "b": 1, "c": 2, "d": 0} {
		if end, ok := s.SequenceEnd(store.QueueRows, []byte(prefix)); !ok || end != want {
			t.Errorf("after a reopen, end of %s = %d (ok %v), want %d", prefix, end, ok, want)
		}
	}
	appendTo(s, "c", 1)
	if end, _ := s.SequenceEnd(store.QueueRows, []byte("c")); end != 3 {
		t.Fatalf("end of c after one more append = %d, want 3", end)
	}
}
