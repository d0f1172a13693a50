package job

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestMisroutedInputStopsJob: an input whose key the partition's range
// does not hold was routed by another layout (a rescale). The job neither
// processes it (a key in two partitions) nor acknowledges it (the sender
// may be live, and the receiving life the outdated one): the epoch fails
// naming it, and the message stays unacknowledged for the partition's
// next life.
func TestMisroutedInputStopsJob(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 2, Inputs: []string{"s"}},
	}}
	hub := transport.NewHub(0)
	// The key's partition under 2; the job runs the other one.
	k, err := pl.Computations["B"].KeyOf(weir.Row{"key": "k"})
	if err != nil {
		t.Fatal(err)
	}
	other := 1 - plan.PartitionIndex(k.Hash, 2)
	lo, hi, toEnd := plan.PartitionRange(other, 2)
	part := plan.KeyedPartitionID("B", other)
	j := startTestJob(t, st, hub, pl, "B", plan.PartitionSpec{ID: part, Index: other, Lo: lo, Hi: hi, ToEnd: toEnd})
	ts, _ := st.Timestamp(ctx)
	offerInput(hub, part, &weir.Message{ID: msgid.Ordered(uint64(ts), "s", 0), Stream: "s",
		SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: weir.Row{"key": "k"}})
	_, err = j.Epoch(ctx)
	if err == nil || !strings.Contains(err.Error(), "routed by another layout") {
		t.Fatalf("an epoch fetching a misrouted input: %v; want an error saying it was routed by another layout", err)
	}
	if n := hub.Pending(part); n != 1 {
		t.Fatalf("%d messages pending after the failed epoch; want the misrouted one, unacknowledged", n)
	}
}
