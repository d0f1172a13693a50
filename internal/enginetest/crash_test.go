package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
)

// TestCrashPoints kills jobs at each named crash point (before commit; after
// commit before acks; after acks before the outbox erase) many times during
// a run, for Transform and Swift readers, and checks that every key's counts
// are exactly 1..n once each: replacements restore from the last commit,
// re-send undelivered outputs with their original ids, and receivers
// deduplicate them.
func TestCrashPoints(t *testing.T) {
	for _, point := range AllCrashPoints {
		for _, swift := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/swift=%v", point, swift), func(t *testing.T) {
				ctx := context.Background()
				crashes := NewCrashes(uint64(len(point)), 0.08, 25, point)
				h := New(t, Options{Seed: 42, SwiftReader: swift, ExtraStage: swift, Messages: 800, Hooks: crashes})
				if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
					t.Fatal(err)
				}
				if crashes.Total() == 0 {
					t.Fatalf("no crash was injected at %s: the test proves nothing", point)
				}
				bad, err := h.CheckExactlyOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bad {
					t.Error(b)
				}
				t.Logf("crashes injected: %v; controller: %+v", crashes.Injected, h.Ctl.Stats())
			})
		}
	}
}

// TestAtLeastOnceConsistent runs the counter in at_least_once_consistent
// mode with crashes after the commit and before the acks: re-sent inputs
// are processed again (duplicates appear), but nothing is lost. Without
// restarts it is exact.
func TestAtLeastOnceConsistent(t *testing.T) {
	ctx := context.Background()
	t.Run("no-faults-exact", func(t *testing.T) {
		h := New(t, Options{Seed: 5, Mode: plan.AtLeastOnceConsistent})
		if err := h.RunToCompletion(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		bad, err := h.CheckExactlyOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Error(b)
		}
	})
	t.Run("restarts-duplicate-never-lose", func(t *testing.T) {
		crashes := NewCrashes(9, 0.2, 30, job.CrashAfterCommitBeforeAck)
		h := New(t, Options{Seed: 5, Mode: plan.AtLeastOnceConsistent, Hooks: crashes, Messages: 800})
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
		t.Logf("crashes %v, duplicates %d", crashes.Injected, dups)
		if dups == 0 {
			t.Errorf("expected duplicates after %d restarts in at_least_once_consistent mode, got none", crashes.Total())
		}
	})
}

// TestNonCanonicalKeyRoutingAfterRestart: Reader emits a uint32 first in
// Counter's group_by key, and jobs crash after their commit, so outputs are
// re-sent from the outbox (where the value decodes as uint64). Every copy
// must reach the same Counter partition: a re-sent copy routed elsewhere
// escapes deduplication and is counted twice (issue 23, item 3).
func TestNonCanonicalKeyRoutingAfterRestart(t *testing.T) {
	for _, point := range []job.CrashPoint{job.CrashAfterCommitBeforeAck, job.CrashAfterAckBeforeErase} {
		t.Run(string(point), func(t *testing.T) {
			ctx := context.Background()
			crashes := NewCrashes(11, 0.1, 25, point)
			h := New(t, Options{Seed: 9, Messages: 600, CounterPartitions: 4, Uint32Bucket: true, Hooks: crashes})
			if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if crashes.Total() == 0 {
				t.Fatalf("no crash was injected at %s: the test proves nothing", point)
			}
			h.RequireExactlyOnce(ctx)
		})
	}
}

// TestDeadLettersExactlyOnce: Counter fails on every 13th input after
// counting it; with a dead-letter stream the failed calls are undone and
// each poisoned input becomes exactly one dead letter, while jobs crash at
// every named point: the other inputs are counted 1..n once each, and no
// dead letter is lost or repeated.
func TestDeadLettersExactlyOnce(t *testing.T) {
	for _, point := range AllCrashPoints {
		t.Run(string(point), func(t *testing.T) {
			ctx := context.Background()
			crashes := NewCrashes(uint64(len(point))+5, 0.08, 25, point)
			h := New(t, Options{Seed: 13, Messages: 700, Poison: 13, Hooks: crashes})
			if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if crashes.Total() == 0 {
				t.Fatalf("no crash was injected at %s: the test proves nothing", point)
			}
			h.RequireExactlyOnce(ctx)
			bad, err := h.CheckDeadLetters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}
