package disttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/internal/testproc"
)

// TestDeposedControllerStandsBy: the active controller is frozen (SIGSTOP)
// past its leadership lease; the standby takes over with a larger term.
// Thawed (SIGCONT), the old controller finds its lease lost and stands by
// again — it acts no more (its writes and lease creations need the lost
// lease, workers refuse its term) — and the pipeline counts exactly once.
func TestDeposedControllerStandsBy(t *testing.T) {
	url, st := pgStore(t)
	ctx := context.Background()
	c, err := NewCounter(ctx, st, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(spec, []byte(distSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	for i, port := range ports {
		w := start(t, fmt.Sprintf("w%d", i), "worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", fmt.Sprintf("w%d", i))
		w.await(t, "listening on", time.Minute)
	}
	ctls := map[string]*proc{}
	for _, id := range []string{"c1", "c2"} {
		ctls[id] = start(t, id, "controller", "--store", url, "--spec", spec, "--id", id, "--lease-timeout", "2s", "-v")
		ctls[id].await(t, "admin API at", time.Minute)
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute) // a hang guard
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never happened: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var first cluster.LeaderRecord
	eventually("a leader", func() bool {
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
	eventually("the standby takes over", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		second = rec
		return err == nil && ok && rec.Lease > first.Lease
	})
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGCONT)
	eventually("the old controller stands by again", func() bool {
		return strings.Contains(old.out.String(), "standing by again")
	})
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	want := c.Total()
	eventually("every event counted", func() bool {
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
