package job

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestFullBufferBlocksInput: while a receiving partition's buffer refuses
// a job's outputs, the job takes no input (it would only wait in memory,
// decoded, behind the refused outputs); once room appears, the refused
// outputs go first and input flows again. Sinks are not told: the outbox
// is not at its limit.
func TestFullBufferBlocksInput(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	relay := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		return out.Add("s", m.Payload)
	})
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"A": {Code: relay, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"s"}},
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
	}}
	hub := transport.NewHub(1 << 20)
	src := plan.KeyedPartitionID("A", 0)
	j := startTestJob(t, st, hub, pl, "A", plan.PartitionSpec{ID: src, ToEnd: true})
	dest := plan.KeyedPartitionID("B", 0)
	recv := hub.Attach(dest)
	input := func(from, to int) {
		for i := from; i < to; i++ {
			offerInput(hub, src, &weir.Message{ID: msgid.Ordered(1, "in", uint64(i)), Stream: "in", Payload: weir.Row{"key": fmt.Sprint("k", i)}})
		}
	}
	epoch := func(what string) EpochResult {
		t.Helper()
		res, err := j.Epoch(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}

	input(0, 4)
	hub.SetRowLimit(3) // B's buffer, and A's from now on
	if res := epoch("first epoch"); res.Fetched != 4 {
		t.Fatalf("first epoch fetched %d, want 4", res.Fetched)
	}
	if n := j.waitingOffers(); n != 1 {
		t.Fatalf("%d outputs wait for room in a buffer of 3 rows after 4 outputs, want 1", n)
	}
	refused := j.offers.blocked[0].waiting[0].msg.ID
	input(4, 6)
	if res := epoch("blocked epoch"); res.Fetched != 0 || !res.Idle {
		t.Fatalf("with an output refused the job fetched %d inputs (idle %v), want none", res.Fetched, res.Idle)
	}
	ds := recv.Fetch(10, 1<<20)
	if len(ds) != 3 {
		t.Fatalf("the receiver fetched %d, want 3", len(ds))
	}
	for _, d := range ds {
		recv.Ack(d.Msg.ID)
	}
	if res := epoch("epoch after room"); res.Fetched != 2 {
		t.Fatalf("after room appeared the job fetched %d inputs, want the 2 waiting", res.Fetched)
	}
	ds = recv.Fetch(10, 1<<20)
	if len(ds) == 0 || ds[0].Msg.ID != refused {
		t.Fatalf("the refused output %s did not arrive first: %d fetched", refused, len(ds))
	}
}
