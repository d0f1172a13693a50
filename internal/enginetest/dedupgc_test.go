package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// TestSwiftSourceIdlePartitionDoesNotPinDedupGC: a Swift source partition
// that is empty, or that has read nothing since its job restarted, must
// not hold the stream's SystemWatermark at zero — or the receivers' dedup
// rows are never garbage-collected. The source never completes (an
// unbounded topic), so only the watermark can free the rows.
func TestSwiftSourceIdlePartitionDoesNotPinDedupGC(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := New(t, Options{Seed: 3, Messages: 300, Clock: clk, SwiftReader: true})
	h.Source.Infinite = true
	h.Source.Append("empty") // a partition with no record at all
	dedupRows := func() int {
		n := 0
		for _, tb := range []store.Table{store.InputMessages, store.CompactInputMessages} {
			if err := h.Store.Scan(ctx, store.Range{Table: tb}, func(_, _ []byte) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	counted := func() bool {
		c, _ := h.Counts(ctx)
		n := 0
		for _, v := range c {
			n += len(v)
		}
		return n == 300
	}
	advance := func() { clk.Advance(100 * time.Millisecond) } // past lease_check_period: idle jobs probe
	if err := h.RunUntil(ctx, 30*time.Second, counted, advance); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return dedupRows() == 0 }, advance); err != nil {
		t.Fatalf("dedup rows never collected (%d left): %v", dedupRows(), err)
	}
	// Jobs that restart and read nothing new must not pin it either.
	wm := h.Board.Control("Counter").InputSystemWM["words"]
	for _, w := range h.Workers {
		w.Restart()
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.Board.Control("Counter").InputSystemWM["words"] > wm }, advance); err != nil {
		t.Fatalf("SystemWatermark of words stuck at %d after the restart: %v", wm, err)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
