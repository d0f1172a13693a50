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

// TestRefusedOfferIsNotOvertaken: an output refused by a full buffer waits;
// a later output to the same receiving partition must not be offered
// directly when room appears, or it would arrive before the waiting one.
// Outputs of one sender partition reach a receiving partition in emission
// order (the lineage ordering guarantee).
func TestRefusedOfferIsNotOvertaken(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"A": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"s"}},
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
	}}
	// A one-byte buffer holds one message at a time.
	hub := transport.NewHub(1)
	j := startTestJob(t, st, hub, pl, "A", plan.PartitionSpec{ID: plan.KeyedPartitionID("A", 0), ToEnd: true})
	dest := plan.KeyedPartitionID("B", 0)
	recv := hub.Attach(dest)
	offer := func(i uint64) {
		m := &weir.Message{ID: msgid.Ordered(7, "s", i), Stream: "s", Payload: weir.Row{"key": "k"}}
		j.enqueue(dest, pendingOffer{msg: m, size: 10})
		j.flushTouched()
	}
	var arrived []msgid.ID
	take := func() {
		for _, d := range recv.Fetch(10, 1<<20) {
			arrived = append(arrived, d.Msg.ID)
			recv.Ack(d.Msg.ID)
		}
	}
	offer(1) // accepted: the buffer was empty
	offer(2) // refused: waits
	take()   // room again
	offer(3) // must queue behind 2
	for i := 0; i < 5 && len(arrived) < 3; i++ {
		j.retryOffers()
		take()
	}
	want := []msgid.ID{msgid.Ordered(7, "s", 1), msgid.Ordered(7, "s", 2), msgid.Ordered(7, "s", 3)}
	if len(arrived) != 3 || arrived[0] != want[0] || arrived[1] != want[1] || arrived[2] != want[2] {
		t.Fatalf("arrival order %v, want %v", arrived, want)
	}
	if n := j.waitingOffers(); n != 0 || len(j.offers.blocked) != 0 {
		t.Fatalf("after delivery: %d offers waiting, %d destinations blocked", n, len(j.offers.blocked))
	}
}
