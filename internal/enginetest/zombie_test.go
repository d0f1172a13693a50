package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// zombieRun freezes the job of partition p just before its commit, lets the
// controller replace it (by lost-job detection, or by lease expiry when
// expire is set: pings of the frozen job's lease are dropped), then resumes
// the frozen job. Its commit must fail with a lease-lost error, and the
// pipeline's output must still be exact.
func zombieRun(t *testing.T, p transport.PartitionID, expire bool, base Options) *Harness {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	freezer := NewFreezer(p, job.CrashBeforeCommit)
	var fs *FaultStore
	o := base
	o.Seed, o.Clock, o.Hooks, o.Messages = 3, clk, freezer, 600
	o.Wrap = func(st store.Store) store.Store { fs = NewFaultStore(st, 1); return fs }
	if expire {
		// Lost-job detection slower than lease expiry, so expiry removes it.
		o.LeaseTimeout, o.LostTimeout = 2*time.Second, time.Minute
	}
	h := New(t, o)

	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		select {
		case <-freezer.Frozen():
			return true
		default:
			return false
		}
	}, nil); err != nil {
		t.Fatal(err)
	}
	zombieLease := h.Ctl.Lease(p)
	if zombieLease == 0 {
		t.Fatal("frozen partition has no lease")
	}
	if expire {
		fs.DropPings(zombieLease)
	}
	// Move the store clock in small steps (live leases keep being pinged)
	// until the controller has replaced the frozen job.
	if err := h.RunUntil(ctx, 30*time.Second, func() bool {
		l := h.Ctl.Lease(p)
		return l != 0 && l != zombieLease
	}, func() { clk.Advance(300 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	state, err := h.Store.LeaseState(ctx, zombieLease)
	if err != nil {
		t.Fatal(err)
	}
	want := store.LeaseAborted
	if expire {
		want = store.LeaseExpired
	}
	if state != want {
		t.Errorf("zombie lease is %s, want %s", state, want)
	}
	freezer.Release()
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	attempts, accepted := fs.Zombies()
	if attempts == 0 {
		t.Fatal("the zombie never attempted a commit: the test proves nothing")
	}
	if accepted != 0 {
		t.Errorf("%d of %d zombie commits were accepted", accepted, attempts)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if o.External {
		bad, err := CheckExternalCounts(ctx, h.Store, "Counter", h.Expected)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Error(b)
		}
	}
	t.Logf("zombie commits attempted %d, accepted %d; controller %+v", attempts, accepted, h.Ctl.Stats())
	return h
}

// TestZombieAbortedLease: a job stalls before its commit, the controller
// declares it lost and aborts its lease, a replacement takes over; when the
// stalled job resumes, its commit is rejected.
func TestZombieAbortedLease(t *testing.T) {
	for _, p := range []transport.PartitionID{"Counter/0", "Reader@p1"} {
		t.Run(string(p), func(t *testing.T) { zombieRun(t, p, false, Options{}) })
	}
}

// TestZombieExpiredLease: the controller's pings of a job's lease are lost,
// the lease expires, the controller replaces the job; the old job's commit
// is rejected.
func TestZombieExpiredLease(t *testing.T) {
	for _, p := range []transport.PartitionID{"Counter/1", "Reader@p0"} {
		t.Run(string(p), func(t *testing.T) { zombieRun(t, p, true, Options{}) })
	}
}
