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
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// TestSwiftStateRefused: a SwiftMap deduplicates inputs only by watermark,
// so a redelivered input (its acknowledgement lost after the commit) would
// update state twice. State in a Swift computation is refused with an error
// that says why and what to use instead, and nothing is written.
func TestSwiftStateRefused(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	seen := weir.NewState[int64]("seen")
	code := weir.SwiftMap(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		n, err := seen.Get(ctx)
		if err != nil {
			return err
		}
		seen.Set(ctx, n+1)
		return out.Add("out", m.Payload)
	})
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"S": {Code: code, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"out"}},
	}}
	hub := transport.NewHub(0)
	part := plan.KeyedPartitionID("S", 0)
	j := startTestJob(t, st, hub, pl, "S", plan.PartitionSpec{ID: part, ToEnd: true})
	ts, _ := st.Timestamp(ctx)
	offerInput(hub, part, &weir.Message{ID: msgid.Ordered(uint64(ts), "in", 0), Stream: "in",
		SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: weir.Row{"key": "k"}})
	_, err := j.Epoch(ctx)
	if err == nil || !strings.Contains(err.Error(), "may not use state") || !strings.Contains(err.Error(), "Transform") {
		t.Fatalf("epoch of a SwiftMap using state: %v; want an error refusing state", err)
	}
	n := 0
	if err := st.Scan(ctx, store.Range{Table: store.States}, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d state rows written", n)
	}
}
