package enginetest

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// ExternalTable is the external state table of the external counters:
// rows (owner, key) → count.
var ExternalTable = &externalstate.Table{Name: "key_counts",
	Key:   []spec.Column{{Name: "owner", Type: spec.TypeString}, {Name: "key", Type: spec.TypeString}},
	Value: []spec.Column{{Name: "count", Type: spec.TypeInt64}}}

// ExternalCounter is a keyed Transform that keeps its counts in
// ExternalTable, under its owner's key prefix: for each message it reads
// the row (owner, key), increments its count, writes it back and emits
// {"key", "count"} on its first output stream. It keeps no weir.State, so
// the emitted counts are exactly 1..n only if every epoch sees its own
// buffered writes and each write is applied exactly once.
func ExternalCounter(owner string) weir.Computation {
	t := weir.NewExternalState(ExternalTable.Name)
	c := weir.Transform(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		k, _ := m.Payload["key"].(string)
		row, _, err := t.Get(ctx, owner, k)
		if err != nil {
			return err
		}
		n, _ := row["count"].(int64)
		n++
		if err := t.Put(ctx, weir.Row{"owner": owner, "key": k, "count": n}); err != nil {
			return err
		}
		return out.Add(out.Streams()[0], weir.Row{"key": k, "count": n})
	})
	c.Keyed = true
	c.ExternalStateWrites = []string{ExternalTable.Name}
	return c
}

// externalCounterPlan makes computation name an ExternalCounter of owner
// reading in and emitting on out, delivered to the collecting sink sinkID.
func externalCounterPlan(name, owner, in, out, sinkID string, o Options, batch plan.BatchPlan) *plan.CompPlan {
	return &plan.CompPlan{
		Name: name, Code: ExternalCounter(owner), GroupBy: []string{"key"}, Partitions: o.CounterPartitions,
		Mode: o.Mode, CompactDedup: o.Compact, Inputs: []string{in}, Outputs: []string{out}, Batch: batch,
		ExternalStates: map[string]plan.ExternalAccess{ExternalTable.Name: {Table: ExternalTable, Write: true}},
		Sinks: []plan.SinkPlan{{ID: sinkID, InputStream: out, New: func() (connector.Sink, error) {
			return testconn.NewCollectSink(sinkID), nil
		}}},
	}
}

// ExternalCounts reads ExternalTable: owner → key → count.
func ExternalCounts(ctx context.Context, st store.Store) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	err := externalstate.Scan(ctx, st, ExternalTable.Name, nil, nil, 0, func(_ []byte, r map[string]any) (bool, error) {
		o, _ := r["owner"].(string)
		k, _ := r["key"].(string)
		n, ok := r["count"].(int64)
		if !ok {
			return false, fmt.Errorf("row %v has no int64 count", r)
		}
		if out[o] == nil {
			out[o] = map[string]int64{}
		}
		out[o][k] = n
		return true, nil
	})
	return out, err
}

// CheckExternalCounts compares owner's rows of ExternalTable with want
// (key → count) and describes every difference.
func CheckExternalCounts(ctx context.Context, st store.Store, owner string, want map[string]int) ([]string, error) {
	all, err := ExternalCounts(ctx, st)
	if err != nil {
		return nil, err
	}
	got := all[owner]
	var bad []string
	for k, n := range want {
		if got[k] != int64(n) {
			bad = append(bad, fmt.Sprintf("external state %s/%s: count %d, want %d", owner, k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("external state %s/%s: unexpected row with count %d", owner, k, n))
		}
	}
	return bad, nil
}
