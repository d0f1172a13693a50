package job

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestBatchDurationWaitsToFill: batch_duration lets a job wait for a full
// batch (max_rows_per_batch rows available) after a partial one — no
// longer than batch_duration, and not at all once the batch is full.
func TestBatchDurationWaitsToFill(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}, Batch: plan.BatchPlan{MaxRows: 10}},
	}}
	hub := transport.NewHub(0)
	part := plan.KeyedPartitionID("B", 0)
	j := startTestJob(t, st, hub, pl, "B", plan.PartitionSpec{ID: part, ToEnd: true})
	next := uint64(0)
	send := func(n int) {
		for ; n > 0; n-- {
			next++
			offerInput(hub, part, &weir.Message{ID: msgid.Ordered(next, "s", 0), Stream: "s", Payload: weir.Row{"key": "k"}})
		}
	}
	returns := func(what string, d time.Duration, during func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { j.waitToFill(ctx, d); close(done) }()
		if during != nil {
			during()
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: waitToFill did not return", what)
		}
	}
	send(10)
	returns("a full batch available", time.Hour, nil)
	j.recv.Fetch(100, 1<<20) // take them: none available now
	send(3)
	returns("the batch fills while waiting", time.Hour, func() { send(7) })
	j.recv.Fetch(100, 1<<20)
	send(3)
	returns("batch_duration passes", 10*time.Millisecond, nil)
	if n := j.recv.Available(); n != 3 {
		t.Fatalf("available after the wait = %d, want 3", n)
	}
}
