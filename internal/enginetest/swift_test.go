package enginetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
)

// TestSwiftReplayIdenticalIDs runs a SwiftOrderedSource job for a few
// epochs, replaces it (lease aborted, new job) before any output is
// acknowledged, and checks that the replacement re-emits exactly the same
// message ids: the sequence numbers memorized per offset range were
// committed before the outputs left.
func TestSwiftReplayIdenticalIDs(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := pstore.Open(t.TempDir(), pstore.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := map[string][]weir.Row{}
	for i := 0; i < 100; i++ {
		rows["p0"] = append(rows["p0"], weir.Row{"key": fmt.Sprintf("k%d", i%7)})
	}
	src := testconn.NewSource(rows)
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"Reader": {Code: builtin.Passthrough(weir.KindSwiftMap), Source: src, SourceStream: "events",
			Outputs: []string{"words"}, Batch: plan.BatchPlan{MaxRows: 13}},
		"Down": {Code: builtin.Counter(), GroupBy: []string{"key"}, Partitions: 1,
			Inputs: []string{"words"}, Outputs: []string{"out"}},
	}}
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	hub, board := transport.NewHub(1<<20), board.NewBoard()
	runJob := func(epochs int) store.LeaseID {
		lease, err := st.CreateLease(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j, err := job.New(job.Config{Plan: pl, Comp: pl.Computations["Reader"],
			Partition: plan.PartitionSpec{ID: plan.SourcePartitionID("Reader", "p0"), SourceKey: "p0"},
			JobID:     "j", Lease: lease, Store: st, Hub: hub, Board: board})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Init(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < epochs; i++ {
			if _, err := j.Epoch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
		return lease
	}
	fetchAll := func() []msgid.ID {
		r := hub.Attach(plan.KeyedPartitionID("Down", 0))
		defer r.Detach()
		var ids []msgid.ID
		for _, d := range r.Fetch(1<<20, 1<<30) {
			ids = append(ids, d.Msg.ID)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		return ids
	}
	first := runJob(5)
	a := fetchAll()
	if len(a) != 65 {
		t.Fatalf("first job sent %d messages, want 65 (5 epochs of 13)", len(a))
	}
	if err := st.AbortLease(ctx, first); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second) // later epochs get later sequence numbers
	runJob(5)
	b := fetchAll()
	if len(b) != len(a) {
		t.Fatalf("after replay the buffer holds %d distinct ids, want %d: the replay produced new ids", len(b), len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("id %d differs after replay: %s vs %s", i, a[i], b[i])
		}
	}
}

// batcher is a SwiftMap that merges all messages of a key in an epoch into
// one output listing its parents' seq columns.
func batcher() weir.Computation {
	return weir.Computation{Kind: weir.KindSwiftMap, OnMessages: func(ctx weir.Context, msgs []*weir.Message, out weir.Output) error {
		var seqs []string
		for _, m := range msgs {
			seqs = append(seqs, fmt.Sprint(m.Payload["seq"]))
		}
		return out.AddWithParents("batches", weir.Row{"key": msgs[0].Payload["key"], "seqs": strings.Join(seqs, ",")}, msgs...)
	}}
}

// TestSwiftBatching runs a batching SwiftMap with
// allow_batching_with_relaxed_guarantees under crashes: every parent reaches
// the sink at least once. Without the flag, an output with several parents
// is an error.
func TestSwiftBatching(t *testing.T) {
	ctx := context.Background()
	build := func(allow bool, hooks job.Hooks) (*Harness, error) {
		h := New(t, Options{Seed: 12, Messages: 400, Hooks: hooks})
		p := h.Plan.Computations
		p["Batcher"] = &plan.CompPlan{Code: batcher(), GroupBy: []string{"key"}, Partitions: 2,
			AllowBatching: allow, Inputs: []string{"words"}, Outputs: []string{"batches"},
			Batch: plan.BatchPlan{MaxRows: 50, EmptyBackoff: 2 * time.Millisecond}}
		p["Counter"].Inputs = []string{"batches"}
		p["Counter"].Code = builtin.Passthrough(weir.KindTransform)
		p["Counter"].Sinks = []plan.SinkPlan{{ID: "out", InputStream: "counts", New: func() (connector.Sink, error) {
			return testconn.NewCollectSink("out"), nil
		}}}
		h.Ctl = h.NewController()
		return h, nil
	}
	t.Run("allowed", func(t *testing.T) {
		crashes := NewCrashes(13, 0.1, 20)
		h, err := build(true, crashes)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		rows, err := testconn.ReadCollected(ctx, h.Store, "out")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, r := range rows {
			for _, s := range strings.Split(r.Row["seqs"].(string), ",") {
				seen[s]++
			}
		}
		for i := 0; i < 400; i++ {
			if seen[fmt.Sprint(i)] == 0 {
				t.Errorf("parent seq %d never reached the sink", i)
			}
		}
		t.Logf("crashes %v; %d batches carried %d parents", crashes.Injected, len(rows), len(seen))
	})
	t.Run("refused-without-flag", func(t *testing.T) {
		h, err := build(false, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = h.RunUntil(ctx, 10*time.Second, func() bool {
			for _, p := range h.Ctl.Partitions() {
				if strings.Contains(p.LastError, "allow_batching_with_relaxed_guarantees") {
					return true
				}
			}
			return false
		}, nil)
		if err != nil {
			t.Fatalf("a merged output without the flag was not refused: %v", err)
		}
	})
}
