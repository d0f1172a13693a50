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

// TestOutputWithoutReceiverKeyFailsEpoch: an output lacking a column its
// receiving computation groups by must not be routed under some default
// key (every such row would be counted under one key). The epoch fails
// before it commits, naming the output, the receiver and the column.
func TestOutputWithoutReceiverKeyFailsEpoch(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	drop := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		return out.Add("s", weir.Row{"user": m.Payload["key"]}) // "key" renamed: B cannot group
	})
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"A": {Code: drop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"s"}},
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 2, Inputs: []string{"s"}},
	}}
	hub := transport.NewHub(0)
	part := plan.KeyedPartitionID("A", 0)
	j := startTestJob(t, st, hub, pl, "A", plan.PartitionSpec{ID: part, ToEnd: true})
	ts, _ := st.Timestamp(ctx)
	offerInput(hub, part, &weir.Message{ID: msgid.Ordered(uint64(ts), "in", 0), Stream: "in",
		SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: weir.Row{"key": "k"}})
	_, err := j.Epoch(ctx)
	if err == nil || !strings.Contains(err.Error(), `groups by "key"`) || !strings.Contains(err.Error(), "routed to B") {
		t.Fatalf("epoch emitting an unroutable output: %v", err)
	}
	if n, _, err := countOutbox(ctx, st, part); err != nil || n != 0 {
		t.Fatalf("outbox holds %d rows (%v): the failed epoch committed", n, err)
	}
}
