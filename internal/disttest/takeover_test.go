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

// TestHandoverAdoptsJobs: the active controller goes while events are in
// flight; the standby takes over and adopts every running job instead of
// aborting their leases and starting them again (issue 27, item 2): its
// /metrics count 8 jobs adopted and none started, no job is removed, each
// worker says it kept its jobs for the new term, and the counts are
// exactly once.
//
//   - SIGTERM: the controller resigns; the standby leads at its next poll.
//   - SIGKILL: the standby leads once the leadership lease (2 s) expired.
//     The job leases (5 s here) outlive that, and so do the jobs, although
//     the workers' --lost-timeout (1 s) passes first: a worker without
//     heartbeats keeps its jobs until their lease timeout too (before, it
//     stopped them after --lost-timeout and there was nothing to adopt).
//
// It also keeps the check of issue 23, item 6: a new leader's jobs must
// not be charged with its predecessor's exits (workers report exits by job
// id; before job ids carried the term, both controllers numbered their
// jobs from 1 and the new leader's fresh jobs were removed at once).
func TestHandoverAdoptsJobs(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sigName(sig), func(t *testing.T) { testHandover(t, sig) })
	}
}

func testHandover(t *testing.T, sig syscall.Signal) {
	url, st, c, spec := distSetup(t)
	ctx := context.Background()
	text := strings.Replace(distSpec, `"lease_timeout" = "2s"`, `"lease_timeout" = "5s"`, 1)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := startWorkers(t, url, 2, "-v", "--lost-timeout", "1s")
	r := rand.New(rand.NewPCG(6, 6))
	counted := func() {
		t.Helper()
		want := c.Total()
		eventually(t, "every event counted", func() bool {
			_, n, err := c.Read(ctx)
			return err == nil && n >= want
		})
	}
	first := start(t, "c1", "controller", "--store", url, "--spec", spec, "--id", "c1", "--lease-timeout", "2s", "-v")
	first.await(t, "is active", time.Minute)
	second := start(t, "c2", "controller", "--store", url, "--spec", spec, "--id", "c2", "--lease-timeout", "2s", "-v")
	admin := adminAddr(t, second)
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	counted()
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	first.cmd.Process.Signal(sig)
	<-first.done
	// The jobs go on without a controller while their leases live.
	counted()
	t.Logf("from c1's %s to every event counted: %v", sigName(sig), time.Since(stopped).Round(time.Millisecond))
	second.await(t, "is active", time.Minute)
	eventually(t, "c2 leads", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		return err == nil && ok && rec.ID == "c2"
	})
	t.Logf("c2 leads %v after the %s", time.Since(stopped).Round(time.Millisecond), sigName(sig))
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	counted()
	checkCounts(t, ctx, c)
	adopted := metricValue(t, admin, `weir_jobs_total{event="adopted"}`)
	started := metricValue(t, admin, `weir_jobs_total{event="started"}`)
	if adopted != 8 || started != 0 {
		t.Errorf("the new leader adopted %v jobs and started %v; want 8 adopted (every partition), none started:\n%s", adopted, started, tail(second.out.String()))
	}
	for _, line := range strings.Split(second.out.String(), "\n") {
		if strings.Contains(line, "removing job") {
			t.Errorf("the new leader removed a job: %s", line)
		}
	}
	kept := 0
	for _, w := range ws {
		kept += strings.Count(w.out.String(), "adopted by term")
	}
	if kept != 8 {
		t.Errorf("the workers kept %d jobs for the new term, want 8", kept)
	}
}
