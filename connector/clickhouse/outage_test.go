package clickhouse_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
)

// onePerPartition fails t unless stderr has at most one first-failure
// line per partition (later failures are summarized) and says no
// partition runs healthy again (its sink never could write).
func onePerPartition(t *testing.T, stderr string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`partition (\S+) failed: `).FindAllStringSubmatch(stderr, -1) {
		seen[m[1]]++
	}
	for p, n := range seen {
		if n > 1 {
			t.Errorf("stderr has %d first-failure lines for %s, want one, then summaries\n%s", n, p, stderr)
		}
	}
	if strings.Contains(stderr, "runs healthy again") {
		t.Errorf("a partition whose sink cannot write was called healthy:\n%s", stderr)
	}
}

// outageStatus is the part of 'weir pipeline status' the outage test reads.
type outageStatus struct {
	Failing []struct {
		Partition string `json:"partition"`
		LastError string `json:"last_error"`
	} `json:"failing"`
	SinkFailures []struct {
		Partition string `json:"partition"`
		Sink      string `json:"sink"`
		Error     string `json:"error"`
	} `json:"sink_failures"`
}

// TestWeirRunServerDown (issue 25 item 3): the ClickHouse example through
// the real binary, its host a loopback port where nothing listens. Within
// a few seconds stderr says the sink cannot reach the server and why, once
// per partition (then summaries, not a line per retry); 'weir pipeline
// status' lists the sink under sink_failures and as the failing
// partition's last error; SIGTERM's drain times out naming the sink and
// the error. Then the server answers at that address (a forwarder to the
// live one) and the same command completes: every count exactly once.
func TestWeirRunServerDown(t *testing.T) {
	srv := chserver.Shared(t)
	bin := buildWeir(t)
	table := replicated(t, srv)
	down := unusedAddr(t) // nothing listens there now
	dir := t.TempDir()
	// A job counts as healthy once it ran job_restart_backoff_max without
	// failing: 2s is longer than a restarted job takes to fail again.
	const fast = "\n" + `"dynamic_spec" = {"job_restart_backoff" = "50ms"; "job_restart_backoff_max" = "2s"};`
	specPath := filepath.Join(dir, "spec.yson")
	if err := os.WriteFile(specPath, []byte(exampleSpec(t, down, table, 50)+fast), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	runWeir(t, bin, "", "queue", "create", "--data", data, "--partitions", "2", "events")
	rows, want := events(600, 40, 11)
	var in strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&in, `{"key": %q, "i": %d}`+"\n", r["key"], r["i"])
	}
	runWeir(t, bin, in.String(), "queue", "write", "--data", data, "events")

	began := time.Now()
	cmd := exec.Command(bin, "run", "--data", data, "--spec", specPath, "--progress", "0", "--drain-timeout", "2s")
	var stderr logCapture
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(25 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within a minute\n%s", what, stderr.String())
			}
		}
	}
	reach := "cannot reach http://" + down
	waitFor("the outage on stderr", func() bool { return strings.Contains(stderr.String(), reach) })
	d := time.Since(began)
	if d > 10*time.Second {
		t.Errorf("the outage reached stderr after %v, want a few seconds", d)
	}
	t.Logf("the outage reached stderr %v after the start", d.Round(time.Millisecond))
	if s := stderr.String(); !strings.Contains(s, "sink out") || !strings.Contains(s, "connection refused") {
		t.Errorf("stderr does not name the sink and the reason:\n%s", s)
	}
	var st outageStatus
	waitFor("the outage in the status", func() bool {
		out, err := exec.Command(bin, "pipeline", "status", "--data", data).Output()
		return err == nil && json.Unmarshal(out, &st) == nil && len(st.SinkFailures) > 0 && len(st.Failing) > 0
	})
	if f := st.SinkFailures[0]; f.Sink != "out" || !strings.Contains(f.Error, reach) || !strings.Contains(f.Error, "retrying (attempt") {
		t.Errorf("sink_failures lists %+v, want sink out and %q", f, reach)
	}
	if f := st.Failing[0]; !strings.Contains(f.LastError, "sink out") || !strings.Contains(f.LastError, reach) {
		t.Errorf("the failing partition's last error is %q, want the sink and %q", f.LastError, reach)
	}
	time.Sleep(1500 * time.Millisecond) // several restarts: stderr only summarizes them
	onePerPartition(t, stderr.String())
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if ee, ok := runErr.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Fatalf("weir run after SIGTERM: %v, want exit 3 (the drain timed out)\n%s", runErr, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("weir run did not stop after SIGTERM\n%s", stderr.String())
	}
	s := stderr.String()
	i := strings.Index(s, "the drain did not finish within 2s")
	if i < 0 {
		t.Fatalf("no drain timeout on stderr:\n%s", s)
	}
	if tail := s[i:]; !strings.Contains(tail, "FAILING: Counter") || !strings.Contains(tail, "sink out") || !strings.Contains(tail, "cannot reach") {
		t.Errorf("the drain timeout does not name the sink and its error:\n%s", tail)
	}

	// The server is back at its address (host is a static parameter: a
	// paused pipeline refuses another): the same command completes, every
	// count exactly once.
	forward(t, down, srv.Host())
	runWeir(t, bin, "", "run", "--data", data, "--spec", specPath, "--progress", "0")
	checkExact(t, counts(t, srv, table), want)
}
