package job

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

func idleJob(t *testing.T, clk *clock.Manual, period time.Duration, seed uint64) (*Job, store.Store, store.LeaseID) {
	t.Helper()
	st := openStore(t, clk)
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"C": {Code: weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil }),
			GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, LeaseCheckPeriod: period},
	}}
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := st.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(Config{Plan: pl, Comp: pl.Computations["C"], Partition: plan.PartitionSpec{ID: plan.KeyedPartitionID("C", 0), ToEnd: true},
		JobID: "j", Lease: lease, Store: st, Hub: transport.NewHub(0), Board: board.NewBoard(), Rand: rand.New(rand.NewPCG(seed, 1))})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return j, st, lease
}

// TestLeaseProbe: an idle job commits nothing until lease_check_period
// (±20%) has passed since its last commit, then commits a lease-fenced
// empty transaction; once the lease is aborted, that probe fails with a
// lease-lost error and the job stops.
func TestLeaseProbe(t *testing.T) {
	ctx := context.Background()
	const period = 10 * time.Second
	for seed := uint64(0); seed < 20; seed++ {
		clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		j, st, lease := idleJob(t, clk, period, seed)
		var probedAt time.Duration
		for elapsed := time.Duration(0); elapsed <= 13*time.Second; elapsed += 100 * time.Millisecond {
			res, err := j.Epoch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Idle {
				t.Fatal("idle job reported work")
			}
			if res.Committed {
				probedAt = elapsed
				break
			}
			clk.Advance(100 * time.Millisecond)
		}
		if probedAt < 8*time.Second || probedAt > 12*time.Second {
			t.Fatalf("seed %d: probe after %v, want within [8s, 12s] (10s ±20%%)", seed, probedAt)
		}
		if err := st.AbortLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		clk.Advance(13 * time.Second)
		_, err := j.Epoch(ctx)
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("seed %d: probe after abort returned %v, want a lease-lost error", seed, err)
		}
		j.Close()
	}
}
