package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// TestLagOf: the controller's lag counts, per source partition, the queue
// rows its source has not committed and, per computation, those rows
// (a source reader) or what its writer emitted that it has not processed;
// the pipeline has caught up once every count is 0.
func TestLagOf(t *testing.T) {
	st, sp := counterFixture(t, pstore.Options{})
	ctx := context.Background()
	ev, err := queue.Create(ctx, st, "events", 2)
	if err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn()
	for p, n := range []int{5, 3} {
		for i := 0; i < n; i++ {
			if err := ev.Append(txn, p, weir.Row{"key": "k"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := ev.CommitConsumer(ctx, "counter", 0, 4); err != nil {
		t.Fatal(err)
	}
	b := board.NewBoard()
	b.AddCounters("Reader", board.Counters{Inputs: 4, Outputs: 4})
	b.AddCounters("Counter", board.Counters{Inputs: 3})
	parts := []controller.PartitionStatus{{Partition: "Reader@0"}, {Partition: "Counter@0"}}
	post := func(quiet bool) {
		for _, p := range parts {
			b.Post(board.Status{Partition: p.Partition, Quiet: quiet, At: st.Now()})
		}
	}
	post(true) // quiet before the rows are read: not caught up
	var lw lagWatch
	l := lw.lagOf(ctx, st, sp, parts, b)
	if l.SourcePartitions["Reader@0"] != 1 || l.SourcePartitions["Reader@1"] != 3 {
		t.Fatalf("source partitions' lag %v, want Reader@0 1, Reader@1 3", l.SourcePartitions)
	}
	if r := l.Computations["Reader"].Rows; r == nil || *r != 4 {
		t.Fatalf("Reader's lag %v, want 4 rows", l.Computations["Reader"])
	}
	if r := l.Computations["Counter"].Rows; r == nil || *r != 1 {
		t.Fatalf("Counter's lag %v, want 1 row", l.Computations["Counter"])
	}
	if l.CaughtUp {
		t.Fatal("caught up with rows to go")
	}
	for p, next := range []uint64{5, 3} {
		if err := ev.CommitConsumer(ctx, "counter", p, next); err != nil {
			t.Fatal(err)
		}
	}
	b.AddCounters("Reader", board.Counters{Inputs: 4, Outputs: 4})
	b.AddCounters("Counter", board.Counters{Inputs: 5})
	if l := lw.lagOf(ctx, st, sp, parts, b); l.CaughtUp || *l.Computations["Reader"].Rows != 0 || *l.Computations["Counter"].Rows != 0 {
		t.Fatalf("caught up on statuses posted before the rows were read consumed: %+v", l)
	}
	time.Sleep(time.Millisecond)
	post(false)
	if l := lw.lagOf(ctx, st, sp, parts, b); l.CaughtUp {
		t.Fatalf("caught up with messages in flight: %+v", l)
	}
	time.Sleep(time.Millisecond)
	post(true)
	if l := lw.lagOf(ctx, st, sp, parts, b); !l.CaughtUp {
		t.Fatalf("not caught up once every partition is quiet after the rows were consumed: %+v", l)
	}
	// A row written and consumed between two polls: the quiet statuses
	// may predate it.
	txn = store.NewTxn()
	if err := ev.Append(txn, 1, weir.Row{"key": "k"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if err := ev.CommitConsumer(ctx, "counter", 1, 4); err != nil {
		t.Fatal(err)
	}
	if l := lw.lagOf(ctx, st, sp, parts, b); l.CaughtUp {
		t.Fatalf("caught up on statuses that may predate a row written since: %+v", l)
	}
	time.Sleep(time.Millisecond)
	post(true)
	if l := lw.lagOf(ctx, st, sp, parts, b); !l.CaughtUp {
		t.Fatalf("not caught up once quiet after the new row was read consumed: %+v", l)
	}
}

// counterFixture opens a fresh Pebble store with opts (closed when the
// test ends) and parses the counter example's spec.
func counterFixture(t *testing.T, opts pstore.Options) (*pstore.Store, *spec.Pipeline) {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	text, err := os.ReadFile(filepath.Join("..", "examples", "counter", "spec.yson"))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spec.Parse(text, "counter.yson")
	if err != nil {
		t.Fatal(err)
	}
	return st, sp
}
