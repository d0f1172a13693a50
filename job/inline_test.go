package job

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// inlinePlan: C relays its input "in" to "out", written by sink; with
// downstream, computation D reads "out" too.
func inlinePlan(sink func() (connector.Sink, error), downstream bool) *plan.Plan {
	relay := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error { return out.Add("out", m.Payload) })
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"C": {Code: relay, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"out"},
			Sinks: []plan.SinkPlan{{ID: "out", InputStream: "out", New: sink}}},
	}}
	if downstream {
		pl.Computations["D"] = &plan.CompPlan{Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"out"}}
	}
	return pl
}

func offerKeys(hub *transport.Hub, p transport.PartitionID, n int) {
	for i := range n {
		offerInput(hub, p, &weir.Message{ID: msgid.Ordered(1, "in", uint64(i)), Stream: "in", Payload: weir.Row{"key": fmt.Sprint("k", i)}})
	}
}

// TestInlineSinkOutputsSkipTheOutbox: an output whose only destination is
// a sink that delivers inline (a sync sink) is written by the epoch's
// commit and never enters the outbox; one that a computation reads too
// stays in the outbox until that computation acknowledges it.
func TestInlineSinkOutputsSkipTheOutbox(t *testing.T) {
	for _, downstream := range []bool{false, true} {
		t.Run(fmt.Sprintf("downstream=%v", downstream), func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
			pl := inlinePlan(func() (connector.Sink, error) { return testconn.NewCollectSink("out"), nil }, downstream)
			hub := transport.NewHub(0)
			src := plan.KeyedPartitionID("C", 0)
			j := startTestJob(t, st, hub, pl, "C", plan.PartitionSpec{ID: src, ToEnd: true})
			offerKeys(hub, src, 3)
			if _, err := j.Epoch(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := testconn.ReadCollected(ctx, st, "out")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 {
				t.Fatalf("the sink wrote %d outputs, want 3", len(got))
			}
			inline := j.inlineAcks.Load() // outputs delivered without an outbox entry
			n, _ := j.box.undelivered()
			if !downstream && (inline != 3 || n != 0) {
				t.Fatalf("outputs of a stream only a sync sink reads: %d delivered inline, %d undelivered; want 3 and 0", inline, n)
			}
			if downstream && inline != 0 {
				t.Fatalf("%d outputs that D reads too were delivered inline, want none", inline)
			}
			if downstream && n != 3 {
				t.Fatalf("%d outputs undelivered, want the 3 that D has not acknowledged", n)
			}
		})
	}
}

// lazySink says it delivers inline but keeps the done callbacks.
type lazySink struct {
	connector.Sink
	held []func(error)
}

func (s *lazySink) DeliversInline() bool { return true }
func (s *lazySink) Distribute(_ *weir.Message, done func(error)) {
	s.held = append(s.held, done)
}

// TestInlineSinkMustAcknowledge: a sink that says it delivers inline but
// does not acknowledge an output within Distribute fails the epoch, naming
// itself, rather than losing track of the output.
func TestInlineSinkMustAcknowledge(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	pl := inlinePlan(func() (connector.Sink, error) { return &lazySink{Sink: testconn.NewCollectSink("out")}, nil }, false)
	hub := transport.NewHub(0)
	src := plan.KeyedPartitionID("C", 0)
	j := startTestJob(t, st, hub, pl, "C", plan.PartitionSpec{ID: src, ToEnd: true})
	offerKeys(hub, src, 1)
	_, err := j.Epoch(ctx)
	if err == nil || !strings.Contains(err.Error(), "sink out delivers inline") {
		t.Fatalf("epoch error %v, want one naming sink out", err)
	}
}
