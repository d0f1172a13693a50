package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/job"
)

// TestTimers drives the counter by event-time timers: every message sets a
// timer, the source watermark (max event time minus the out-of-orderness
// bound, minimum over source partitions) fires them, and the end of the
// finite input fires the rest. With crashes between firing and commit, a
// fired timer's deletion is lost together with its result, so it fires again
// in the replacement job — exactly once in effect.
func TestTimers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		hooks *Crashes
	}{
		{"no-faults", nil},
		{"crash-before-commit", NewCrashes(4, 0.1, 30, job.CrashBeforeCommit)},
		{"crash-after-commit", NewCrashes(5, 0.1, 30, job.CrashAfterCommitBeforeAck)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Seed: 6, Timers: true, Messages: 600}
			if tc.hooks != nil {
				o.Hooks = tc.hooks
			}
			h := New(t, o)
			if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if tc.hooks != nil && tc.hooks.Total() == 0 {
				t.Fatal("no crash injected")
			}
			bad, err := h.CheckExactlyOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

// TestTimersFireByWatermark uses a source that never ends: timers must fire
// only as the event-time watermark (minimum over source partitions of the
// largest event time seen) passes their trigger, and no timer beyond it
// may fire.
func TestTimersFireByWatermark(t *testing.T) {
	ctx := context.Background()
	const n = 1500
	h := New(t, Options{Seed: 6, Timers: true, Messages: n})
	h.Source.Infinite = true
	// Event time of message i is i ms; partition i%2. The watermark ends at
	// min(max event of p0, max event of p1) = (n-2) ms, so the timers of
	// messages with i + 1000 <= n-2 fire, and no others.
	want := map[string]int{}
	total := 0
	for p, rows := range h.sourceRows() {
		_ = p
		for _, r := range rows {
			if r["seq"].(int64)+1000 <= n-2 {
				want[r["key"].(string)]++
				total++
			}
		}
	}
	h.Expected = want
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		c, _ := h.Counts(ctx)
		got := 0
		for _, v := range c {
			got += len(v)
		}
		return got >= total
	}, nil); err != nil {
		t.Fatal(err)
	}
	// Give the pipeline more cycles: nothing beyond the watermark may fire.
	for i := 0; i < 50; i++ {
		if err := h.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
