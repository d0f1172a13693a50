package job

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// startTestJob validates pl and starts a job of computation comp on
// partition spec: a fresh lease, the given hub, a new board; Init done.
// The job is closed when the test ends.
func startTestJob(t *testing.T, st store.Store, hub *transport.Hub, pl *plan.Plan, comp string, spec plan.PartitionSpec) *Job {
	t.Helper()
	ctx := context.Background()
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	lease, err := st.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(Config{Plan: pl, Comp: pl.Computations[comp], Partition: spec, JobID: plan.JobID(comp + "-test"),
		Lease: lease, Store: st, Hub: hub, Board: board.NewBoard(), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return j
}

// offerInput offers m to partition p as a test's input: a one-message
// OfferBatch of 10 bytes, unfenced (the zero token), with no hook (no
// sender hears its acknowledgement).
func offerInput(hub *transport.Hub, p transport.PartitionID, m *weir.Message) {
	hub.OfferBatch(transport.SenderToken{}, p, []transport.Offer{{Msg: m, Size: 10}}, nil)
}
