package queue

import (
	"context"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
)

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestReadable: on the embedded store a queue source partition says when
// a read may find rows (connector.ReadNotifier): a channel already closed
// when rows lie past the offset, one that a write to the partition closes
// otherwise (a write to another partition does not), and none that wakes
// the job for rows a read did not find (deleted ones: no busy loop).
func TestReadable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	q, err := Create(ctx, st, "events", 2)
	if err != nil {
		t.Fatal(err)
	}
	p := openSourcePartition(t, st, "events", "0")
	n := p.(connector.ReadNotifier)
	write := func(part int) {
		t.Helper()
		if err := q.Write(ctx, []weir.Row{{"k": "v"}}, []int{part}); err != nil {
			t.Fatal(err)
		}
	}
	empty := n.Readable(0)
	if empty == nil || isClosed(empty) {
		t.Fatal("an empty partition is readable")
	}
	write(1)
	if isClosed(empty) {
		t.Fatal("a write to partition 1 woke a reader of partition 0")
	}
	write(0)
	if !isClosed(empty) {
		t.Fatal("a write to partition 0 did not wake its reader")
	}
	if !isClosed(n.Readable(0)) {
		t.Fatal("partition 0 has a row at offset 0, but is not readable from 0")
	}
	if c := n.Readable(1); isClosed(c) {
		t.Fatal("partition 0 is readable from 1, past its one row")
	}
	// A read from 0 after the row was deleted finds nothing: the partition
	// must not say it is readable from 0 until it grows.
	txn := store.NewTxn()
	txn.DeleteRange(store.QueueRows, q.rowPrefix(0), append(append([]byte(nil), q.rowPrefix(0)...), 0xff))
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	b, err := p.Read(ctx, 0, 10, 1<<20)
	if err != nil || len(b.Records) != 0 || !b.End {
		t.Fatalf("read after the delete = %+v, %v", b, err)
	}
	c := n.Readable(0)
	if isClosed(c) {
		t.Fatal("readable for a deleted row a read did not find: the job would read in a busy loop")
	}
	write(0)
	if !isClosed(c) {
		t.Fatal("a write after the delete did not wake the reader")
	}
}

// openSourcePartition opens partition part of a QueueSource over queue
// (consumer "c").
func openSourcePartition(t *testing.T, st store.Store, queue, part string) connector.SourcePartition {
	t.Helper()
	src, err := NewSource(connector.SourceParams{Path: "s", Store: st, Parameters: map[string]any{"queue_path": queue, "consumer_path": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.Open(context.Background(), part)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
