package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
)

// TestIdlePartitionDoesNotHoldWatermark: the event-time watermark is the
// minimum over source partitions, except that a partition with no new
// record for idle_partition_timeout stops holding it back. Partition p1
// has only early events; without the timeout the watermark stays at p1's
// last event and late timers never fire; with it, p1 goes idle (by the
// store clock) and p0's progress fires them.
func TestIdlePartitionDoesNotHoldWatermark(t *testing.T) {
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprintf("idle_timeout=%v", idle), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			h := New(t, Options{Seed: 1, Timers: true, Messages: 1, Clock: clk})
			h.Source.Infinite = true
			// p0: 3000 events 1 ms apart; p1: 5 events at the very start.
			want := map[string]int{}
			for i := 0; i < 3000; i++ {
				k := fmt.Sprintf("k%d", i%7)
				h.Source.Append("p0", weir.Row{"key": k, "event_ts": int64(i) * int64(time.Millisecond)})
				if int64(i)+1000 <= 2999 {
					want[k]++ // fires once the watermark passes event+1s
				}
			}
			for i := 0; i < 5; i++ {
				h.Source.Append("p1", weir.Row{"key": "early", "event_ts": int64(i) * int64(time.Millisecond)})
				want["early"]++ // early events fire too once the watermark moves
			}
			for k, n := range h.Expected { // the harness's own generated row(s), at event time 0
				want[k] += n
			}
			h.Source.Append("p0") // keep both partitions
			reader := h.Plan.Computations["Reader"]
			if idle {
				reader.Watermark.IdleTimeout = time.Second
			}
			fired := func() int {
				c, _ := h.Counts(ctx)
				n := 0
				for _, v := range c {
					n += len(v)
				}
				return n
			}
			total := 0
			for _, n := range want {
				total += n
			}
			// The positive case waits until every timer fired (bounded by
			// real time, for slow machines); the negative case runs a fixed
			// number of cycles in which nothing may fire.
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; ; i++ {
				if err := h.Cycle(ctx); err != nil {
					t.Fatal(err)
				}
				clk.Advance(20 * time.Millisecond)
				time.Sleep(2 * time.Millisecond)
				if idle && (fired() >= total || time.Now().After(deadline)) {
					break
				}
				if !idle && i >= 300 {
					break
				}
			}
			got := fired()
			if idle && got < total {
				t.Fatalf("with an idle timeout %d of %d timers fired; the idle partition held the watermark back", got, total)
			}
			if !idle && got != 0 {
				t.Fatalf("without an idle timeout %d timers fired, but p1's watermark (its last event, 4ms) is below every trigger", got)
			}
			if idle {
				h.Expected = want
				bad, err := h.CheckExactlyOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bad {
					t.Error(b)
				}
			}
		})
	}
}
