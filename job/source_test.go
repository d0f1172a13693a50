package job

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// gapSource has one partition whose offsets 0..4 hold no record (a run of
// empty tables, transaction markers); offset 5 holds one.
type gapSource struct{ reads []connector.Offset }

func (g *gapSource) Partitions(context.Context) ([]string, error) { return []string{"p"}, nil }
func (g *gapSource) Open(context.Context, string) (connector.SourcePartition, error) {
	return &gapPartition{g}, nil
}
func (g *gapSource) Close() error { return nil }

type gapPartition struct{ g *gapSource }

func (p *gapPartition) Key() string { return "p" }
func (p *gapPartition) Read(_ context.Context, from connector.Offset, _, _ int) (connector.Batch, error) {
	p.g.reads = append(p.g.reads, from)
	if from < 5 {
		return connector.Batch{Next: 5}, nil
	}
	if from == 5 {
		return connector.Batch{Records: []connector.Record{{Offset: 5, WriteTimestamp: 1 << 40, Row: weir.Row{"key": "a"}}}, Next: 6, End: true}, nil
	}
	return connector.Batch{Next: from, End: true}, nil
}
func (p *gapPartition) ReportCommitted(context.Context, connector.Offset) error { return nil }
func (p *gapPartition) Finite() bool                                            { return true }
func (p *gapPartition) Close() error                                            { return nil }

// TestEmptyBatchMovesThePosition: a read that finds no record but reports
// a Next beyond its start (offsets that hold nothing) moves the position
// there, committed like any other, for a Transform and a Swift reader:
// those offsets are not read again.
func TestEmptyBatchMovesThePosition(t *testing.T) {
	for _, kind := range []weir.Kind{weir.KindTransform, weir.KindSwiftMap} {
		ctx := context.Background()
		st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		src := &gapSource{}
		pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
			"R": {Code: builtin.Passthrough(kind), Source: src, SourceStream: "s", Outputs: []string{"out"}},
		}}
		part := plan.SourcePartitionID("R", "p")
		j := startTestJob(t, st, transport.NewHub(0), pl, "R", plan.PartitionSpec{ID: part, SourceKey: "p"})
		for i := 0; i < 4; i++ {
			if _, err := j.Epoch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(src.reads) < 2 || src.reads[0] != 0 || src.reads[1] != 5 {
			t.Fatalf("%v: reads from %v, want 0 then 5", kind, src.reads)
		}
		v, _, err := st.Get(ctx, store.PartitionStates, tables.PartitionStateKey(string(part), sourceStateName))
		if err != nil {
			t.Fatal(err)
		}
		r := tables.Reader{B: v[1:]}
		if off := r.Uvarint(); off != 6 {
			t.Fatalf("%v: committed position %d, want 6", kind, off)
		}
	}
}
