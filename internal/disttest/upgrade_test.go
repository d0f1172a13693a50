package disttest

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// TestRollingUpgrade: the previous release of weir (previousRelease: built
// from git) runs the counter on network-namespace hosts — PostgreSQL, two
// workers, an active controller and a standby, TLS and a token — while
// events are written, and an operator upgrades it in place, one process at
// a time (issue 27, item 3), in an order that makes each side run with the
// other's previous release:
//
//  1. this build's weir store init, online (the schema is migrated
//     forward, or left as it is, under running processes);
//  2. worker w1: SIGTERM (it drains: its jobs move to w2), then this
//     build's worker on the same host — the old controller starts jobs on
//     it, beside w2 of the old release;
//  3. the standby controller, then the active one (SIGTERM): the upgraded
//     standby takes over with one old and one new worker and adopts the
//     jobs of both (the previous release speaks control protocol version 2,
//     which answers a survey; a version 1 worker answered it as a heartbeat
//     and its jobs restarted);
//  4. worker w2, then the old active controller comes back upgraded as the
//     standby.
//
// After every step the pipeline is healthy (every partition has a job on a
// live worker) and counts grow; at the end every event is counted exactly
// once and every worker registered this build's protocol version.
func TestRollingUpgrade(t *testing.T) {
	testproc.SkipUnlessLong(t)
	prev := previousRelease(t)
	if out, err := exec.Command(prev, "version").Output(); err != nil || !strings.Contains(string(out), "previous-") {
		t.Fatalf("the previous release's weir version: %q, %v", out, err)
	}
	workers := []string{"w1", "w2"}
	hc := newHostClusterBin(t, prev, workers...)
	for _, w := range workers {
		hc.startWorker(w)
	}
	hc.startController("ctl1")
	hc.eventually("ctl1 leads", func() bool { rec, ok := hc.leader(); return ok && rec.ID == "ctl1" })
	hc.startController("ctl2")
	healthy := func(after string) {
		t.Helper()
		d := hc.eventually("healthy after "+after, func() bool { return hc.status().healthy() })
		t.Logf("%s: healthy after %v", after, d.Round(time.Millisecond))
	}
	healthy("the start (previous release)")

	stopWriting := hc.writeSteadily(3, 80)
	progress := hc.progress
	progress("the start")

	// 1. The store, online.
	if out, err := exec.Command(weirBin, "store", "init", "--store", hc.pg.SocketURL()).CombinedOutput(); err != nil {
		t.Fatalf("this build's weir store init under the running previous release: %v\n%s", err, out)
	}
	progress("this build's store init")

	// 2.–4.
	hc.bin = weirBin
	upgradeWorker := func(w string) {
		t.Helper()
		hc.terminate(w)
		hc.startWorker(w)
		d := hc.eventually(w+" upgraded runs jobs", func() bool {
			l := hc.status()
			if !l.healthy() {
				return false
			}
			per, _ := l.spread()
			return per[w] > 0
		})
		t.Logf("worker %s upgraded: it runs jobs %v after its start", w, d.Round(time.Millisecond))
		progress("the upgrade of " + w)
	}
	upgradeWorker("w1")
	hc.terminate("ctl2")
	hc.startController("ctl2")
	progress("the standby's upgrade")
	hc.terminate("ctl1")
	hc.eventually("the upgraded ctl2 leads", func() bool {
		rec, ok := hc.leader()
		return ok && rec.ID == "ctl2" && hc.status().healthy()
	})
	adopted, started := hc.metric(`weir_jobs_total{event="adopted"}`), hc.metric(`weir_jobs_total{event="started"}`)
	t.Logf("the upgraded ctl2 leads an upgraded and an old worker: adopted %v jobs, started %v", adopted, started)
	// Both workers answer its survey (version 2 and 3): every job is
	// adopted, unless one was being moved or restarted just then.
	if adopted < jobsTotal/2 {
		t.Errorf("the upgraded controller adopted %v jobs and started %v; want (nearly) all %d adopted: both workers answer its survey", adopted, started, jobsTotal)
	}
	progress("the active controller's stop")
	upgradeWorker("w2")
	hc.startController("ctl1")
	progress("the old active controller's return, upgraded")

	stopWriting()
	hc.countedExactlyOnce()
	for _, s := range hc.status().Workers {
		if !s.Alive || s.Version == 0 {
			t.Errorf("worker %+v after the upgrade: want alive, registered with this build's protocol version", s)
		}
	}
}

// metric reads a sample of the active controller's GET /metrics (-1 if
// absent).
func (hc *hostCluster) metric(name string) float64 {
	hc.t.Helper()
	b, ok := hc.getLeader("/metrics")
	if !ok {
		hc.t.Fatal("no /metrics from an active controller")
	}
	if v, ok := sample(hc.t, b, name); ok {
		return v
	}
	return -1
}
