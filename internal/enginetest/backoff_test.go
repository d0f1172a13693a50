package enginetest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// poison fails every epoch of one partition that has input, before its
// commit, while on: a bad message that its code cannot process.
type poison struct {
	partition transport.PartitionID
	on        atomic.Bool
}

func (p *poison) Crash(id transport.PartitionID, point job.CrashPoint) error {
	if p.on.Load() && id == p.partition && point == job.CrashBeforeCommit {
		return errors.New("poison message")
	}
	return nil
}

// TestFailingJobBacksOff (issue 11, "a job that fails on a bad message is
// restarted in the same cycle with no backoff, forever"): a partition whose
// job keeps failing is restarted after 1 s, 2 s, 4 s, 4 s (the cap) of
// store time, never earlier; its status shows the failures and the last
// error; once the message can be processed its data is intact, and a job
// that runs for the cap resets the count.
func TestFailingJobBacksOff(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	bad := &poison{partition: plan.KeyedPartitionID("Counter", 0)}
	bad.on.Store(true)
	h := New(t, Options{Seed: 36, Messages: 300, Clock: clk, Hooks: bad,
		RestartBackoff: time.Second, RestartBackoffMax: 4 * time.Second})
	h.Source.Infinite = true
	status := func() controller.PartitionStatus {
		for _, p := range h.Ctl.Partitions() {
			if p.Partition == bad.partition {
				return p
			}
		}
		return controller.PartitionStatus{} // not laid out yet
	}
	// failed waits (cycling, clock still) until the partition's job failed
	// for the n-th time in a row, and checks that the cycle that saw it did
	// not start a replacement.
	failed := func(n int) controller.PartitionStatus {
		t.Helper()
		if err := h.RunUntil(ctx, 30*time.Second, func() bool { return status().ConsecutiveFailures >= n }, nil); err != nil {
			t.Fatal(err)
		}
		s := status()
		if s.ConsecutiveFailures != n || s.Job != "" || !strings.Contains(s.LastError, "poison message") {
			t.Fatalf("after failure %d: %+v", n, s)
		}
		return s
	}
	for n, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		s := failed(n + 1)
		if s.RestartAt == nil || !s.RestartAt.Equal(clk.Now().Add(delay)) {
			t.Fatalf("failure %d: restart at %v, want now + %v", n+1, s.RestartAt, delay)
		}
		// Not a moment earlier: cycles with the clock still start nothing.
		clk.Advance(delay - time.Millisecond)
		for i := 0; i < 20; i++ {
			if err := h.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if s := status(); s.Job != "" || s.Restarts != n {
			t.Fatalf("failure %d: restarted before its backoff of %v ran out: %+v", n+1, delay, s)
		}
		clk.Advance(time.Millisecond)
		if err := h.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		if s := status(); s.Job == "" || s.Restarts != n+1 {
			t.Fatalf("failure %d: not restarted when its backoff ran out: %+v", n+1, s)
		}
	}
	if h.Ctl.Stats().JobsFailed != 4 {
		t.Errorf("JobsFailed = %d, want 4", h.Ctl.Stats().JobsFailed)
	}

	// The message becomes processable: everything is counted once, and a
	// job healthy for the cap (4 s) clears the failure count.
	bad.on.Store(false)
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		return h.total(ctx) == 300 && status().ConsecutiveFailures == 0
	}, func() { clk.Advance(100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	if s := status(); s.LastError == "" || s.RestartAt != nil {
		t.Errorf("healthy partition status %+v: want the last error kept, no restart time", s)
	}
	h.RequireExactlyOnce(ctx)
}
