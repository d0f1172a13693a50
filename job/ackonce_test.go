package job

import (
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestRepeatedAckCountsOnce: an output read by two computations leaves the
// outbox only once both acknowledged it. A destination that acknowledges it
// twice — a transport may re-send an acknowledgement — counts once;
// counting it twice erased the output before the other destination had it.
func TestRepeatedAckCountsOnce(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"A": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"s"}},
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
		"C": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
	}}
	j := startTestJob(t, st, transport.NewHub(1<<20), pl, "A", plan.PartitionSpec{ID: plan.KeyedPartitionID("A", 0), ToEnd: true})
	m := &weir.Message{ID: msgid.Ordered(7, "s", 1), Stream: "s", Payload: weir.Row{"key": "k"}}
	dests, err := j.destinations([]*weir.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	if len(dests[0]) != 2 {
		t.Fatalf("destinations %v, want one partition of B and one of C", dests[0])
	}
	out := j.register(m, false)
	j.distribute([]*weir.Message{m}, dests, []any{out}, nil, func(*weir.Message) bool { return false })

	first := j.ackHook(0)
	first.Acked(transport.Acked{ID: m.ID, Token: out})
	first.Acked(transport.Acked{ID: m.ID, Token: out}) // the same destination again
	j.drainAcks()
	if out.delivered {
		t.Fatalf("output %s left the outbox after two acknowledgements of %s; %s has not acknowledged it", m.ID, dests[0][0], dests[0][1])
	}
	j.ackHook(1).Acked(transport.Acked{ID: m.ID, Token: out})
	j.drainAcks()
	if !out.delivered {
		t.Fatalf("output %s still in the outbox after both destinations acknowledged it", m.ID)
	}
}

// TestRepeatedAckCountsOnceSwift: the same for a Swift output: its parent
// is released only once every destination acknowledged the output.
func TestRepeatedAckCountsOnceSwift(t *testing.T) {
	tr := newSwiftTracker()
	in := &weir.Message{ID: msgid.Ordered(3, "in", 0), Stream: "in"}
	out := &weir.Message{ID: in.ID + "-s:00", Stream: "s"}
	c := &tr.track([]*weir.Message{in}, []*weir.Message{out}, [][]*weir.Message{{in}})[0]
	tr.expect(c, 2)
	tr.delivered(c, 0)
	tr.delivered(c, 0)
	if got := tr.takeReady(); len(got) != 0 {
		t.Fatalf("parent released after two acknowledgements by one of two destinations")
	}
	tr.delivered(c, 1)
	if got := tr.takeReady(); len(got) != 1 || got[0].msg.ID != in.ID {
		t.Fatalf("parent not released after both destinations acknowledged: %v", got)
	}
}
