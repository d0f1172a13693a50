package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/store"
)

// TestAmbiguousCommits makes epoch commits ambiguous — some applied with the
// acknowledgement lost, some never applied — and checks that each job
// resolves the outcome through its partition_transactions row instead of
// guessing: an applied epoch is not applied again, a lost one is retried,
// and the output is exact.
func TestAmbiguousCommits(t *testing.T) {
	ctx := context.Background()
	var fs *FaultStore
	h := New(t, Options{Seed: 8, Messages: 800, Wrap: func(st store.Store) store.Store {
		fs = NewFaultStore(st, 2)
		fs.InjectAmbiguous(0.15, 60)
		return fs
	}})
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if fs.AmbiguousApplied == 0 || fs.AmbiguousLost == 0 {
		t.Fatalf("injected %d applied and %d lost ambiguous commits; need both kinds", fs.AmbiguousApplied, fs.AmbiguousLost)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if st := h.Ctl.Stats(); st.JobsFailed > 0 {
		t.Errorf("%d jobs failed; ambiguous commits must be resolved in place:\n%s", st.JobsFailed, h.Logs())
	}
	t.Logf("ambiguous commits: %d applied, %d lost; controller %+v", fs.AmbiguousApplied, fs.AmbiguousLost, h.Ctl.Stats())
}

// TestAmbiguousCommitLandsLate: epoch commits whose outcome is unknown are
// held back and land later — after the job resolved the outcome as "not
// applied" and committed the epoch again, often after further epochs. Every
// attempt of an epoch is guarded by the partition_transactions row, so a
// late landing applies only if no other attempt of its epoch did, and never
// after a later epoch: no epoch is applied twice, no state or offset moves
// back, and the output is exact. Workers restart now and then, so that
// jobs reload state and offsets from the store: a late landing that
// clobbered them would show as wrong or repeated counts.
func TestAmbiguousCommitLandsLate(t *testing.T) {
	ctx := context.Background()
	for _, swift := range []bool{false, true} {
		var fs *FaultStore
		h := New(t, Options{Seed: 13, Messages: 2000, Keys: 5, CounterPartitions: 1, SwiftReader: swift, Wrap: func(st store.Store) store.Store {
			fs = NewFaultStore(st, 4)
			fs.InjectLate(0.2, 60)
			return fs
		}})
		cycles := 0
		if err := h.RunUntil(ctx, 60*time.Second, func() bool { return h.Ctl.State() == controller.Completed }, func() {
			cycles++
			if cycles%7 == 0 {
				// Late attempts land while their leases are still alive, and
				// then the jobs reload what the store holds.
				fs.LandHeld(ctx)
				h.Workers[cycles/7%len(h.Workers)].Restart()
			}
		}); err != nil {
			t.Fatal(err)
		}
		fs.LandHeld(ctx) // what is still in flight lands after the end
		if fs.LateHeld == 0 || fs.LateRejected == 0 {
			t.Fatalf("swift=%v: held %d attempts, %d rejected when they landed; the test needs late landings after a retry", swift, fs.LateHeld, fs.LateRejected)
		}
		bad, err := h.CheckExactlyOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Errorf("swift=%v: %s", swift, b)
		}
		t.Logf("swift=%v: %d attempts held; late landings: %d applied (before any retry), %d rejected", swift, fs.LateHeld, fs.LateApplied, fs.LateRejected)
	}
}
