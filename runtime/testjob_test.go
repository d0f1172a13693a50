package runtime

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// startTestJob validates plan and starts a job of computation comp on
// partition spec: a fresh lease, the given hub, a new board; Init done.
// The job is closed when the test ends.
func startTestJob(t *testing.T, st store.Store, hub *transport.Hub, plan *Plan, comp string, spec PartitionSpec) *Job {
	t.Helper()
	ctx := context.Background()
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	lease, err := st.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJob(Config{Plan: plan, Comp: plan.Computations[comp], Partition: spec, JobID: JobID(comp + "-test"),
		Lease: lease, Store: st, Hub: hub, Board: NewBoard(), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return j
}
