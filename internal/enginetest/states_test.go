package enginetest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// gate fails every Counter epoch before its commit while closed: the
// Reader's outputs stay undelivered in its outbox.
type gate struct{ closed atomic.Bool }

func (g *gate) Crash(p transport.PartitionID, point job.CrashPoint) error {
	if g.closed.Load() && point == job.CrashBeforeCommit && strings.HasPrefix(string(p), "Counter/") {
		return job.ErrCrashed
	}
	return nil
}

// total sums the counts the sink committed.
func (h *Harness) total(ctx context.Context) int {
	c, _ := h.Counts(ctx)
	n := 0
	for _, v := range c {
		n += len(v)
	}
	return n
}

// TestStopAfterPauseDrains (issue 11, scenario 5): a pipeline paused with
// data in flight — every row read, none counted, the Reader's outbox full
// — and then stopped must drain before it reports stopped: the jobs run
// again in draining mode until every read row is counted. Pausing is a
// state of its own, left once every job has exited.
func TestStopAfterPauseDrains(t *testing.T) {
	ctx := context.Background()
	const n = 600
	g := &gate{}
	g.closed.Store(true)
	h := New(t, Options{Seed: 31, Messages: n, Hooks: g})
	h.Source.Infinite = true // the sources never end: only a drain stops it
	// Every row is read and committed by the Reader; none reaches the counts.
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.outboxRows(ctx) == n }, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Ctl.SetTarget(controller.Paused); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.Ctl.State() == controller.Paused }, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.Logs(), "working → pausing") || !strings.Contains(h.Logs(), "pausing → paused") {
		t.Errorf("working → pausing → paused not logged:\n%s", tail(h.Logs(), 20))
	}
	for _, p := range h.Ctl.Partitions() {
		if p.Job != "" {
			t.Fatalf("paused with job %s on %s", p.Job, p.Partition)
		}
	}
	g.closed.Store(false)
	if err := h.Ctl.SetTarget(controller.Stopped); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.Ctl.State() == controller.Stopped }, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.total(ctx); got != n {
		t.Fatalf("stopped with %d of %d read rows counted: stopped must mean drained", got, n)
	}
	h.RequireExactlyOnce(ctx)
	if !strings.Contains(h.Logs(), "paused → draining") {
		t.Errorf("paused → draining not logged:\n%s", tail(h.Logs(), 20))
	}
}

// outboxRows counts the rows of every outbox in the store.
func (h *Harness) outboxRows(ctx context.Context) int {
	n := 0
	if err := h.Store.Scan(ctx, store.Range{Table: store.OutputMessages}, func(_, _ []byte) bool { n++; return true }); err != nil {
		h.T.Fatalf("scan the outboxes: %v", err)
	}
	return n
}

// TestReportOfRemovedJobIgnored (issue 11, "the status board accepts
// reports from replaced jobs"): after a pause every job is gone; a late
// report from one of them (here, one claiming every partition drained)
// must not count. Before the fix the controller took it for the current
// state, marked every computation complete, and completed the pipeline
// without processing the rest of the input.
func TestReportOfRemovedJobIgnored(t *testing.T) {
	ctx := context.Background()
	g := &gate{}
	g.closed.Store(true) // nothing is counted before the pause
	h := New(t, Options{Seed: 32, Messages: 500, Hooks: g})
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.outboxRows(ctx) > 0 }, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Ctl.SetTarget(controller.Paused); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.Ctl.State() == controller.Paused }, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range h.Workers {
		w.Shutdown() // every job of the run has exited: nothing else posts
	}
	ghosts := 0
	for _, p := range h.Ctl.Partitions() {
		h.Board.Post(board.Status{Partition: p.Partition, Job: plan.JobID(string(p.Partition) + "#ghost"),
			At: h.Store.Now(), Drained: true, Quiet: true, DrainingSeen: true, UpstreamDoneSeen: true})
		ghosts++
	}
	g.closed.Store(false)
	if err := h.Ctl.SetTarget(controller.Working); err != nil {
		t.Fatal(err)
	}
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	h.RequireExactlyOnce(ctx)
	if d := h.Board.DroppedPosts(); d < ghosts {
		t.Errorf("board dropped %d posts, want at least the %d ghost reports", d, ghosts)
	}
}
