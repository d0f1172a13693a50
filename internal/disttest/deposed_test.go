package disttest

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/cluster"
)

// TestDeposedControllerStandsBy: the active controller is frozen (SIGSTOP)
// past its leadership lease; the standby takes over with a larger term.
// Thawed (SIGCONT), the old controller finds its lease lost and stands by
// again — it acts no more (its writes and lease creations need the lost
// lease, workers refuse its term) — and the pipeline counts exactly once.
func TestDeposedControllerStandsBy(t *testing.T) {
	url, st, c, spec := distSetup(t)
	ctx := context.Background()
	startWorkers(t, url, 2)
	ctls := map[string]*proc{}
	for _, id := range []string{"c1", "c2"} {
		ctls[id] = start(t, id, "controller", "--store", url, "--spec", spec, "--id", id, "--lease-timeout", "2s", "-v")
		ctls[id].await(t, "admin API at", time.Minute)
	}
	var first cluster.LeaderRecord
	eventually(t, "a leader", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		first = rec
		return err == nil && ok
	})
	r := rand.New(rand.NewPCG(8, 8))
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	old := ctls[first.ID]
	old.cmd.Process.Signal(syscall.SIGSTOP)
	var second cluster.LeaderRecord
	eventually(t, "the standby takes over", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		second = rec
		return err == nil && ok && rec.Lease > first.Lease
	})
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGCONT)
	// Thawed, it must not present itself as the leader: its store says its
	// lease is over (before, it answered "active": true with its old term
	// until its engine wound down).
	oldAdmin := adminAddr(t, old)
	var st0 struct {
		Active      bool
		Deposed     bool
		Term        uint64
		HighestTerm uint64 `json:"highest_term"`
		StoreError  string `json:"store_error"`
	}
	getJSON(t, oldAdmin, "/status", &st0)
	// If its first store call after the thaw fails (a loaded machine), it
	// knows no higher term, but its own clock says its lease is over.
	wantHighest := st0.StoreError != "" || st0.HighestTerm == uint64(second.Lease)
	if st0.Active || (st0.Term != 0 && (!st0.Deposed || !wantHighest)) {
		t.Fatalf("the thawed controller's status: %+v; want inactive, deposed, highest term %d", st0, second.Lease)
	}
	eventually(t, "the old controller stands by again", func() bool {
		return strings.Contains(old.out.String(), "standing by again")
	})
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	want := c.Total()
	eventually(t, "every event counted", func() bool {
		_, n, err := c.Read(ctx)
		return err == nil && n >= want
	})
	checkCounts(t, ctx, c)
	if rec, _, _ := cluster.ReadLeader(ctx, st); rec.Lease != second.Lease {
		t.Fatalf("leader changed again: %+v after %+v", rec, second)
	}
	t.Logf("%s (term %d) frozen; %s took over (term %d); the old one stood by again", first.ID, first.Lease, second.ID, second.Lease)
	if os.Getenv("WEIR_DIST_LOGS") == "1" {
		t.Logf("old controller:\n%s", old.out.String())
		t.Logf("new controller:\n%s", ctls[second.ID].out.String())
	}
}
