package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
)

// TestNewSourcePartitionPickedUp: a source partition that appears while the
// pipeline runs (a Kafka topic's partition count grew) gets a job within
// the controller's re-list period, and its rows are counted exactly once —
// read by a Transform or by a Swift computation. The new partition's rows
// carry write times below the stream's SystemWatermark (their offsets are
// small; testconn derives write times from offsets): a Swift reader's
// outputs must still not look processed downstream, so their
// SystemTimestamps come from the store's clock when first read (memorized
// per offset range), not from the record's write time.
func TestNewSourcePartitionPickedUp(t *testing.T) {
	for _, swift := range []bool{false, true} {
		t.Run(map[bool]string{false: "transform-reader", true: "swift-reader"}[swift], func(t *testing.T) {
			testNewSourcePartitionPickedUp(t, swift)
		})
	}
}

func testNewSourcePartitionPickedUp(t *testing.T, swift bool) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := New(t, Options{Seed: 2, Messages: 300, Clock: clk, SwiftReader: swift})
	h.Source.Infinite = true // an unbounded topic: the pipeline never completes
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		c, _ := h.Counts(ctx)
		n := 0
		for _, v := range c {
			n += len(v)
		}
		return n == 300
	}, nil); err != nil {
		t.Fatal(err)
	}
	h.Source.Append("p9", weir.Row{"key": "new", "seq": int64(1000)}, weir.Row{"key": "new", "seq": int64(1001)})
	h.Expected["new"] = 2
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		c, _ := h.Counts(ctx)
		return len(c["new"]) >= 2
	}, func() {
		clk.Advance(500 * time.Millisecond) // past the 10s re-list period after a few cycles
	}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range h.Ctl.Partitions() {
		found = found || p.Partition == "Reader@p9"
	}
	if !found {
		t.Fatal("no partition Reader@p9 in the layout")
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
