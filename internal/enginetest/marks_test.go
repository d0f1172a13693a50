package enginetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// allReported: every partition has a job, and that job posted a status at
// or after the store time at.
func (h *Harness) allReported(at time.Time) bool {
	for _, p := range h.Ctl.Partitions() {
		if p.Job == "" {
			return false
		}
		st, ok := h.Board.Status(p.Partition)
		if !ok || st.Job != p.Job || st.At.Before(at) {
			return false
		}
	}
	return true
}

// restartProcess simulates a process restart: every job stops, and a new
// controller with a fresh board and transport loads the state persisted in
// the same store.
func (h *Harness) restartProcess(ctx context.Context) {
	h.T.Helper()
	for _, w := range h.Workers {
		w.Shutdown()
	}
	h.Board = board.NewBoard()
	h.Hub = transport.NewHub(64 << 10)
	h.Workers = h.newWorkers()
	h.Ctl = h.NewController()
	if err := h.Ctl.Load(ctx); err != nil {
		h.T.Fatal(err)
	}
}

// TestPublishedWatermarksNeverGoDown (issue 11, scenario 8): restarted
// source jobs report no event time until they read again, and a restarted
// process knows nothing; neither may lower the event or system watermark
// published to downstream jobs (their event-time timers would stop firing
// until new data arrived).
func TestPublishedWatermarksNeverGoDown(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const n = 400
	h := New(t, Options{Seed: 33, Timers: true, Messages: n, Clock: clk})
	h.Source.Infinite = true
	// Event time of message i is i ms, partition i%2: the watermark ends at
	// the smaller of the partitions' last event times, (n-2) ms.
	top := time.Unix(0, 0).UTC().Add((n - 2) * time.Millisecond)
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		return h.Board.Control("Counter").EventWM.Equal(top)
	}, func() { clk.Advance(100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	before := h.Board.Control("Counter")
	if before.InputSystemWM["words"] == 0 {
		t.Fatal("no SystemWatermark published for words")
	}
	check := func(when string) {
		t.Helper()
		c := h.Board.Control("Counter")
		if c.EventWM.Before(before.EventWM) {
			t.Errorf("%s: Counter's event watermark went down from %v to %v", when, before.EventWM, c.EventWM)
		}
		if c.InputSystemWM["words"] < before.InputSystemWM["words"] {
			t.Errorf("%s: SystemWatermark of words went down from %v to %v", when, before.InputSystemWM["words"], c.InputSystemWM["words"])
		}
	}

	// Every job restarts (a worker process restart): the new Reader jobs
	// have read nothing and report no event time.
	for _, w := range h.Workers {
		w.Restart()
	}
	clk.Advance(time.Second)
	at := clk.Now()
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.allReported(at) }, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the jobs restarted")

	// The whole process restarts; the published marks were persisted.
	clk.Advance(2 * time.Second)
	if err := h.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	h.restartProcess(ctx)
	if err := h.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a process restart")
}

// TestCompletedComputationEmitsAgain (issue 11, "completed computations
// set their watermark to the maximum and persist it"): a computation whose
// finite source is exhausted completes while the pipeline keeps running
// (another source never ends). Its output stream's watermark must stay a
// real timestamp: after a process restart, the source given more rows, the
// new rows must be counted, not dropped below a persisted infinite dedup
// floor.
func TestCompletedComputationEmitsAgain(t *testing.T) {
	for _, swift := range []bool{false, true} {
		t.Run(fmt.Sprintf("swift=%v", swift), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			const n = 300
			h := New(t, Options{Seed: 34, Messages: n, Clock: clk, SwiftReader: swift})
			// A second source that never ends keeps the pipeline from completing.
			other := testconn.NewSource(map[string][]weir.Row{"q0": nil})
			other.Infinite = true
			h.Plan.Computations["Other"] = &plan.CompPlan{Code: builtin.Passthrough(weir.KindTransform),
				Source: other, SourceStream: "more", Outputs: []string{"other"},
				Batch: plan.BatchPlan{MaxRows: 10, EmptyBackoff: 2 * time.Millisecond}}
			h.Plan.Computations["Counter"].Inputs = []string{"words", "other"}
			h.Ctl = h.NewController()
			step := func() { clk.Advance(100 * time.Millisecond) }

			if err := h.RunUntil(ctx, 30*time.Second, func() bool {
				if !strings.Contains(h.Logs(), "computation Reader completed") || h.total(ctx) != n {
					return false
				}
				// Wait for the dedup GC below the completed stream's watermark.
				floor, err := tables.DedupFloor(ctx, h.Store, "Counter", "words")
				return err == nil && floor != 0 && floor == h.Board.Control("Counter").InputSystemWM["words"]
			}, step); err != nil {
				t.Fatal(err)
			}
			if h.Ctl.State() != controller.Working {
				t.Fatalf("state %s, want working (Other never ends)", h.Ctl.State())
			}

			// A later run: the finite source got more rows.
			h.restartProcess(ctx)
			for i := 0; i < 50; i++ {
				k := fmt.Sprintf("k%03d", i%4)
				h.Source.Append("p0", weir.Row{"key": k, "seq": int64(n + i), "event_ts": int64(n+i) * int64(time.Millisecond)})
				h.Expected[k]++
			}
			if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.total(ctx) == n+50 }, step); err != nil {
				floor, _ := tables.DedupFloor(ctx, h.Store, "Counter", "words")
				t.Fatalf("the rows of the later run were not all counted (dedup floor of Counter/words %v): %v", floor, err)
			}
			h.RequireExactlyOnce(ctx)
		})
	}
}
