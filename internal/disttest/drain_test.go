package disttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// TestDrainWorker: SIGTERM drains a worker before maintenance — the
// controller moves its jobs to the other workers, each after its epoch in
// flight (Finish over the heartbeats), the worker exits 0 once it has none
// and the controller has heard of every exit, leaves the pool,
// nothing is counted twice or lost, and no partition counts as failing.
func TestDrainWorker(t *testing.T) {
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
	ports, err := testproc.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	var workers []*proc
	for i := 0; i < 3; i++ {
		w := start(t, fmt.Sprintf("w%d", i), "worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]), "--id", fmt.Sprintf("w%d", i), "-v")
		w.await(t, "listening on", time.Minute)
		workers = append(workers, w)
	}
	admin := fmt.Sprintf("127.0.0.1:%d", ports[3])
	ctl := start(t, "controller", "controller", "--store", url, "--spec", spec, "--admin", admin, "-v")
	ctl.await(t, "admin API at", time.Minute)
	status := func() *layout {
		resp, err := http.Get("http://" + admin + "/status")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var l layout
		if json.NewDecoder(resp.Body).Decode(&l) != nil || !l.Active {
			return nil
		}
		return &l
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute) // a hang guard, not a timing assertion
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never happened: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r := rand.New(rand.NewPCG(21, 1))
	if err := c.Write(ctx, r, 3000, 40, 300); err != nil {
		t.Fatal(err)
	}
	var before *layout
	eventually("jobs on every worker", func() bool {
		before = status()
		if !before.healthy() {
			return false
		}
		per, _ := before.spread()
		return len(per) == 3 && per["w0"] > 0
	})
	// Drain w0 while input keeps coming.
	workers[0].cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 5; i++ {
		if err := c.Write(ctx, r, 500, 40, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := workers[0].wait(t, 2*time.Minute); err != nil {
		t.Fatalf("the drained worker exited with %v:\n%s", err, workers[0].out.String())
	}
	if !strings.Contains(workers[0].out.String(), "drained") {
		t.Fatalf("the worker did not drain:\n%s", workers[0].out.String())
	}
	eventually("w0's jobs elsewhere", func() bool {
		l := status()
		return l.healthy() && len(l.partitionsOn("w0")) == 0
	})
	l := status()
	for _, p := range l.Pipeline.Partitions {
		if p.ConsecutiveFailures > 0 {
			t.Errorf("partition %s counts %d failures after a drain", p.Partition, p.ConsecutiveFailures)
		}
	}
	if !strings.Contains(ctl.out.String(), "moving") {
		t.Errorf("the controller moved nothing:\n%s", ctl.out.String())
	}
	// The drained worker exited only once the controller had heard of
	// every exit: none of its partitions waited for the lost-worker
	// timeout (issue 23, item 7). And its heartbeats stopped with its
	// registration: the controller does not log a failed heartbeat to the
	// gone worker every period.
	if strings.Contains(ctl.out.String(), "worker w0 is lost") {
		t.Errorf("partitions of the drained worker waited for the lost-worker timeout:\n%s", ctl.out.String())
	}
	eventually("w0 leaves the pool", func() bool { return strings.Contains(ctl.out.String(), "worker w0 left") })
	time.Sleep(time.Second) // ten heartbeat periods
	if n := strings.Count(ctl.out.String(), "heartbeat of worker w0"); n > 1 {
		t.Errorf("%d failed heartbeats to the drained worker logged:\n%s", n, ctl.out.String())
	}
	want := c.Total()
	eventually("every event counted", func() bool {
		_, n, err := c.Read(ctx)
		return err == nil && n >= want
	})
	checkCounts(t, ctx, c)
}
