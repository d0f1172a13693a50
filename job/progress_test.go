package job

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// progressSink records the progress its job reports.
type progressSink struct {
	connector.Sink
	seen []connector.Progress
}

func (p *progressSink) Progress(pr connector.Progress) { p.seen = append(p.seen, pr) }

// TestSinksSeeProgress: a sink that observes progress learns, before each
// epoch, its computation's input SystemWatermark and event watermark, and
// whether the pipeline drains or the input has ended — what a sink that
// closes time slots or flushes on a drain needs (Flow's
// UpdateWatermarkState).
func TestSinksSeeProgress(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	sink := &progressSink{Sink: testconn.NewCollectSink("out")}
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"C": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"out"},
			Sinks: []plan.SinkPlan{{ID: "out", InputStream: "out", New: func() (connector.Sink, error) { return sink, nil }}}},
	}}
	hub := transport.NewHub(0)
	j := startTestJob(t, st, hub, pl, "C", plan.PartitionSpec{ID: plan.KeyedPartitionID("C", 0), ToEnd: true})
	ev := time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC)
	j.cfg.Board.(*board.Board).SetControl("C", board.Control{InputSystemWM: map[string]store.Timestamp{"in": 42}, EventWM: ev})
	if _, err := j.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	j.cfg.Board.(*board.Board).SetControl("C", board.Control{InputSystemWM: map[string]store.Timestamp{"in": 50}, EventWM: ev, Draining: true, UpstreamDone: true})
	if _, err := j.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sink.seen) != 2 {
		t.Fatalf("sink saw %d progress reports, want 2", len(sink.seen))
	}
	first, second := sink.seen[0], sink.seen[1]
	if first.SystemWatermark != 42 || !first.EventWatermark.Equal(ev) || first.Draining || first.Final {
		t.Errorf("first progress %+v", first)
	}
	if second.SystemWatermark != 50 || !second.Draining || !second.Final {
		t.Errorf("second progress %+v", second)
	}
}
