package job

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// recordingWriter is an AsyncWriter that records what it was asked to write.
type recordingWriter struct {
	mu  sync.Mutex
	ids []msgid.ID
}

func (w *recordingWriter) Write(_ context.Context, _ connector.ProducerID, _ connector.SeqNo, msgs []*weir.Message) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		w.ids = append(w.ids, m.ID)
	}
	return len(msgs), nil
}

func (w *recordingWriter) written() []msgid.ID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]msgid.ID(nil), w.ids...)
}

// TestAtMostOnceSinkNotGivenReloadedOutputs: outputs that stay in the
// outbox because another destination (a downstream partition) has not
// acknowledged them are reloaded by the next job of the partition; an
// at-most-once sink already had them and must not write them again.
func TestAtMostOnceSinkNotGivenReloadedOutputs(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	w := &recordingWriter{}
	copyIn := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		return out.Add("s", m.Payload)
	})
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"A": {Code: copyIn, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"s"},
			Sinks: []plan.SinkPlan{{ID: "amo", InputStream: "s", New: func() (connector.Sink, error) {
				return connector.NewAtMostOnceSink(w, connector.AtMostOnceStrategy{Enabled: true, SuspendDestructionDuration: time.Second}), nil
			}}}},
		// B never takes its input: A's outputs stay in A's outbox.
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
	}}
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	hub := transport.NewHub(0)
	part := plan.KeyedPartitionID("A", 0)
	send := func(i uint64) {
		ts, _ := st.Timestamp(ctx)
		m := &weir.Message{ID: msgid.Ordered(uint64(ts), "in", i), Stream: "in", SystemTimestamp: ts, AlignmentTimestamp: ts,
			Payload: weir.Row{"key": "k", "i": int64(i)}}
		offerInput(hub, part, m)
	}
	life := func(inputs ...uint64) {
		t.Helper()
		lease, err := st.CreateLease(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		j, err := New(Config{Plan: pl, Comp: pl.Computations["A"], Partition: plan.PartitionSpec{ID: part, ToEnd: true},
			JobID: plan.JobID(lease.String()), Lease: lease, Store: st, Hub: hub, Board: board.NewBoard(), Rand: rand.New(rand.NewPCG(1, 1))})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Init(ctx); err != nil {
			t.Fatal(err)
		}
		for _, i := range inputs {
			send(i)
		}
		for k := 0; k < 3; k++ {
			if _, err := j.Epoch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil { // waits for the sink's queue
			t.Fatal(err)
		}
		if err := st.AbortLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	life(1, 2)
	if n := len(w.written()); n != 2 {
		t.Fatalf("first life wrote %d messages, want 2", n)
	}
	if n, _, err := countOutbox(ctx, st, part); err != nil || n != 2 {
		t.Fatalf("outbox holds %d outputs (%v), want 2 waiting for B", n, err)
	}
	life(3) // reloads the two outputs, processes one new input
	seen := map[msgid.ID]int{}
	for _, id := range w.written() {
		seen[id]++
		if seen[id] > 1 {
			t.Errorf("output %s written %d times by an at-most-once sink", id, seen[id])
		}
	}
	if len(seen) != 3 {
		t.Errorf("wrote %d distinct outputs, want 3: %v", len(seen), w.written())
	}
}

func countOutbox(ctx context.Context, st store.Store, part transport.PartitionID) (int, []msgid.ID, error) {
	p := tables.OutboxPrefix(string(part))
	var ids []msgid.ID
	err := st.Scan(ctx, store.Range{Table: store.OutputMessages, Lo: p, Hi: tables.PrefixEnd(p)}, func(k, _ []byte) bool {
		ids = append(ids, msgid.ID(k[len(p):]))
		return true
	})
	return len(ids), ids, err
}
