package disttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
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
	url, _, c, spec := distSetup(t)
	ctx := context.Background()
	workers := startWorkers(t, url, 3, "-v")
	ports, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("127.0.0.1:%d", ports[0])
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
	r := rand.New(rand.NewPCG(21, 1))
	if err := c.Write(ctx, r, 3000, 40, 300); err != nil {
		t.Fatal(err)
	}
	var before *layout
	eventually(t, "jobs on every worker", func() bool {
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
	eventually(t, "w0's jobs elsewhere", func() bool {
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
	eventually(t, "w0 leaves the pool", func() bool { return strings.Contains(ctl.out.String(), "worker w0 left") })
	time.Sleep(time.Second) // ten heartbeat periods
	if n := strings.Count(ctl.out.String(), "heartbeat of worker w0"); n > 1 {
		t.Errorf("%d failed heartbeats to the drained worker logged:\n%s", n, ctl.out.String())
	}
	want := c.Total()
	eventually(t, "every event counted", func() bool {
		_, n, err := c.Read(ctx)
		return err == nil && n >= want
	})
	checkCounts(t, ctx, c)
}
