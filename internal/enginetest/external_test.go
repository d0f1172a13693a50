package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// External state tests: the counter keeps its counts only in an external
// state table (ExternalCounter), so two oracles hold at once: every key's
// emitted counts are exactly 1..n once each (each epoch read its own
// buffered writes, and no write was applied twice or lost), and the
// table's final row of every key holds exactly n.

func requireExternal(t *testing.T, h *Harness, owner string) {
	t.Helper()
	bad, err := CheckExternalCounts(context.Background(), h.Store, owner, h.Expected)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestExternalStateCrashPoints crashes jobs at every named crash point
// around the commit (before it; after it, before the acks; after the acks,
// before the outbox erase): a replay after a crash before the commit
// applies its writes once; one after the commit finds its inputs
// deduplicated and applies nothing again.
func TestExternalStateCrashPoints(t *testing.T) {
	for _, point := range AllCrashPoints {
		t.Run(string(point), func(t *testing.T) {
			ctx := context.Background()
			crashes := NewCrashes(uint64(len(point))+3, 0.08, 25, point)
			h := New(t, Options{Seed: 17, External: true, Messages: 800, Hooks: crashes})
			if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if crashes.Total() == 0 {
				t.Fatalf("no crash was injected at %s: the test proves nothing", point)
			}
			h.RequireExactlyOnce(ctx)
			requireExternal(t, h, "Counter")
			t.Logf("crashes injected: %v", crashes.Injected)
		})
	}
}

// TestExternalStateZombie: a job frozen before its commit is replaced
// (its lease aborted, or expired); when it resumes, its commit — with its
// external state writes — is refused, and the table is exact.
func TestExternalStateZombie(t *testing.T) {
	for _, expire := range []bool{false, true} {
		name := "aborted"
		if expire {
			name = "expired"
		}
		t.Run(name, func(t *testing.T) {
			zombieRun(t, transport.PartitionID("Counter/1"), expire, Options{External: true})
		})
	}
}

// TestExternalStateDisjointWriters: two computations write one table, each
// its own key range (owner prefix), under crashes: both ranges are exact
// and neither commit ever conflicts with the other.
func TestExternalStateDisjointWriters(t *testing.T) {
	ctx := context.Background()
	crashes := NewCrashes(23, 0.05, 30)
	h := New(t, Options{Seed: 29, External: true, SecondWriter: "Counter2", Messages: 800, Hooks: crashes})
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	h.RequireExactlyOnce(ctx)
	requireExternal(t, h, "Counter")
	requireExternal(t, h, "Counter2")
	got, err := testconn.CountsOf(ctx, h.Store, "out2")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range testconn.ExactlyOnce(got, h.Expected) {
		t.Error("Counter2: " + b)
	}
	t.Logf("crashes injected: %v", crashes.Injected)
}

// TestExternalStateRacingWriters: two computations read-modify-write the
// same rows. Every row the epoch read and then wrote is written only if
// unchanged, so a racing update fails its epoch (redone by the restarted
// job) instead of being lost: each key's row ends at exactly 2n.
func TestExternalStateRacingWriters(t *testing.T) {
	ctx := context.Background()
	h := New(t, Options{Seed: 31, External: true, SecondWriter: "Counter", Messages: 1200, Keys: 4, CounterPartitions: 2, BatchRows: 5})
	before := conflictCount()
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for k, n := range h.Expected {
		want[k] = 2 * n
	}
	bad, err := CheckExternalCounts(ctx, h.Store, "Counter", want)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("conflicts refused: %v; controller %+v", conflictCount()-before, h.Ctl.Stats())
}

// TestExternalStateAtLeastOnceConsistent: in at_least_once_consistent mode
// inputs re-sent after a restart are processed again, and their writes
// applied again — but atomically with the epoch, so the table stays
// consistent with the outputs: each key's row equals the number of counts
// emitted for it, which are 1..m once each with m >= n.
func TestExternalStateAtLeastOnceConsistent(t *testing.T) {
	ctx := context.Background()
	crashes := NewCrashes(9, 0.2, 30, job.CrashAfterCommitBeforeAck)
	h := New(t, Options{Seed: 5, External: true, Mode: plan.AtLeastOnceConsistent, Hooks: crashes, Messages: 800})
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	dups, bad, err := h.CheckAtLeastOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	got, err := h.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	emitted := map[string]int{}
	for k, cs := range got {
		emitted[k] = len(cs)
		seen := map[int64]bool{}
		for _, c := range cs {
			if seen[c] || c < 1 || c > int64(len(cs)) {
				t.Errorf("key %s: counts %v are not 1..%d once each: state and outputs disagree", k, cs, len(cs))
				break
			}
			seen[c] = true
		}
	}
	bad, err = CheckExternalCounts(ctx, h.Store, "Counter", emitted)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if dups == 0 {
		t.Errorf("expected duplicates after %d restarts in at_least_once_consistent mode, got none", crashes.Total())
	}
	t.Logf("crashes %v, duplicates %d", crashes.Injected, dups)
}

func conflictCount() int64 { return externalstate.ConflictsTotal() }
