package disttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testhosts"
	"github.com/weir-stream/weir/internal/testproc"
)

// TestRescaleOnHosts (issue 27, item 1): the counter runs on
// network-namespace hosts — PostgreSQL, two workers, an active controller
// and a standby, TLS and a token — under a steady input while an operator
// rescales the Counter through the active controller's admin API (POST
// /pipeline/rescale) from 4 to 2, 7, 16, 1 and back to 4 partitions,
// with a process SIGKILLed in the middle of two of them:
//
//   - the active controller, while the Counter quiesces: the standby takes
//     over, finds the target in the layout record and carries it out;
//   - a worker, while the Counter quiesces: its jobs restart elsewhere
//     (quiescing again) and the rescale goes on.
//
// After each rescale every partition of the new layout has a job on a live
// worker and counts grow; at the end every event is counted exactly once.
// The pause of each rescale (the Counter takes no input from the quiesce
// to the new jobs' first reports) is read from the controller's log.
func TestRescaleOnHosts(t *testing.T) {
	testproc.SkipUnlessLong(t)
	hc := newHostCluster(t, "w1", "w2")
	hc.startWorker("w1")
	hc.startWorker("w2")
	hc.startController("ctl1")
	hc.eventually("ctl1 leads", func() bool { rec, ok := hc.leader(); return ok && rec.ID == "ctl1" })
	hc.startController("ctl2")
	laidOut := func(n int) bool {
		l := hc.status()
		if l == nil {
			return false
		}
		alive := map[string]bool{}
		for _, w := range l.Workers {
			alive[w.ID] = w.Alive
		}
		counters := 0
		for _, p := range l.Pipeline.Partitions {
			if p.Job == "" || !alive[p.Worker] {
				return false
			}
			if strings.HasPrefix(p.Partition, "Counter/") {
				counters++
			}
		}
		return counters == n && len(l.Pipeline.Partitions) == 4+n
	}
	hc.eventually("healthy at the start", func() bool { return laidOut(4) })

	stopWriting := hc.writeSteadily(1, 60)
	progress := hc.progress
	progress("the start")

	pauses := []string{}
	for _, s := range []struct {
		n    int
		kill string // "", "controller", "worker"
	}{{2, ""}, {7, "controller"}, {16, ""}, {1, "worker"}, {4, ""}} {
		rec, _ := hc.leader()
		if err := hc.postLeader("/pipeline/rescale", fmt.Sprintf(`{"computation": "Counter", "partitions": %d}`, s.n)); err != nil {
			t.Fatalf("rescale to %d: %v", s.n, err)
		}
		asked := time.Now()
		hit := ""
		switch s.kill {
		case "controller":
			// The active controller dies while the Counter quiesces.
			p := hc.procs[rec.ID]
			hc.eventually("the quiesce begins", func() bool { return strings.Contains(logOf(p), "rescaling Counter from 2 to 7") })
			hit = killedAt(logOf(p))
			p.Signal(syscall.SIGKILL)
			<-p.Done()
			standby := "ctl2"
			if rec.ID == "ctl2" {
				standby = "ctl1"
			}
			hc.eventually("the standby leads", func() bool { r, ok := hc.leader(); return ok && r.ID == standby })
			hc.startController(rec.ID) // back as the standby
		case "worker":
			p := hc.procs["w1"]
			hc.eventually("the quiesce begins", func() bool { return strings.Contains(logOf(hc.procs[rec.ID]), "rescaling Counter from 16 to 1") })
			hit = killedAt(logOf(hc.procs[rec.ID]))
			p.Signal(syscall.SIGKILL)
			<-p.Done()
			hc.startWorker("w1")
		}
		hc.eventually(fmt.Sprintf("the Counter on %d partitions", s.n), func() bool { return laidOut(s.n) })
		progress(fmt.Sprintf("the rescale to %d", s.n))
		// The controller reports the pause once every new partition's job
		// reported.
		// reported. A controller killed after the switch took the report
		// with it: then there is none.
		got := ""
		for end := time.Now().Add(10 * time.Second); got == "" && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			for _, host := range []string{"ctl1", "ctl2"} {
				for _, m := range rescalePause.FindAllStringSubmatch(logOf(hc.procs[host]), -1) {
					if m[1] == fmt.Sprint(s.n) {
						got = m[2]
					}
				}
			}
		}
		if got == "" {
			got = "not reported (the controller that switched was killed)"
		}
		pauses = append(pauses, fmt.Sprintf("→%d (%s%s): laid out %v after the request, pause %s", s.n, orDash(s.kill), hit, time.Since(asked).Round(time.Millisecond), got))
	}
	stopWriting()
	want := hc.c.Total()
	hc.eventually("every event counted", func() bool {
		_, n, err := hc.c.Read(context.Background())
		return err == nil && n >= want
	})
	checkCounts(t, context.Background(), hc.c)
	t.Logf("rescales of the Counter: %s", strings.Join(pauses, "; "))
}

// rescalePause finds a controller's log line of a finished rescale: the
// new count and the pause.
var rescalePause = regexp.MustCompile(`the rescale of Counter from \d+ to (\d+) partitions is done; it took no input for (\S+)`)

// logOf reads a process's log (its stderr).
func logOf(p *testhosts.Proc) string {
	b, _ := os.ReadFile(p.Stderr)
	return string(b)
}

// killedAt says which step of the last rescale a controller's log had
// reached.
func killedAt(log string) string {
	i := strings.LastIndex(log, "rescaling Counter from")
	switch {
	case i < 0:
		return ""
	case strings.Contains(log[i:], "layout committed"):
		return ", after the switch"
	case strings.Contains(log[i:], "is quiesced"):
		return ", after the quiesce"
	}
	return ", while quiescing"
}

func orDash(s string) string {
	if s == "" {
		return "no kill"
	}
	return "SIGKILL of the " + s
}

// postLeader POSTs a JSON body to the active controller's admin API (HTTPS,
// the token).
func (hc *hostCluster) postLeader(path, body string) error {
	rec, ok := hc.leader()
	if !ok {
		return fmt.Errorf("no leader")
	}
	req, _ := http.NewRequest(http.MethodPost, "https://"+rec.Admin+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+hc.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return nil
}
