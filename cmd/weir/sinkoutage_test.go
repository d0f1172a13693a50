package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sinkStatus is the part of 'weir pipeline status' the sink outage tests
// read.
type sinkStatus struct {
	State   string `json:"state"`
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

func sinkStatusOf(dir string) (sinkStatus, bool) {
	var st sinkStatus
	out, err := exec.Command(weirBin, "pipeline", "status", "--data", dir).Output()
	return st, err == nil && json.Unmarshal(out, &st) == nil
}

// outageRestart restarts failed jobs fast, and calls a job healthy only
// after 2s without failing: longer than a restarted job whose sink cannot
// reach its server takes to fail again (restartFast's 200ms is not).
const outageRestart = `"dynamic_spec" = {"job_restart_backoff" = "50ms"; "job_restart_backoff_max" = "2s"};`

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestHTTPSinkUnreachableIsVisible (issue 25 item 3): an AsyncHttpSink
// whose receiver does not listen. Within a few seconds stderr says, once
// (then summaries), that the sink cannot reach it and why; 'weir pipeline
// status' lists it under sink_failures and as the partition's last error;
// SIGTERM's drain times out naming the sink and the reason. When the
// receiver listens, the same command delivers every row.
func TestHTTPSinkUnreachableIsVisible(t *testing.T) {
	const n = 30
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "1", "events")
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"body": "row %d"}`+"\n", i)
	}
	weir(t, in.String(), "queue", "write", "--data", dir, "events")
	addr := closedPort(t)
	spec := writeSpec(t, "http.yson", `"computations" = {
    "Reader" = {"computation_class_name" = "Passthrough"; `+eventsSource+` "output_stream_ids" = ["rows"];
        "sinks" = {"post" = {"sink_class_name" = "AsyncHttpSink"; "input_stream_ids" = ["rows"];
            "parameters" = {"url" = "http://`+addr+`/in"; "payload_column" = "body"}}}};
};
"streams" = {"rows" = {}};
`+outageRestart)

	began := time.Now()
	p := start(t, weirBin, nil, "run", "--data", dir, "--spec", spec, "--progress", "0", "--drain-timeout", "2s")
	want := "cannot reach http://" + addr
	poll(t, "the outage on stderr", p, func() bool { return strings.Contains(p.stderr.String(), want) })
	d := time.Since(began)
	if d > 10*time.Second {
		t.Errorf("the outage reached stderr after %v, want a few seconds", d)
	}
	t.Logf("the outage reached stderr %v after the start", d.Round(time.Millisecond))
	if !strings.Contains(p.stderr.String(), "connection refused") || !strings.Contains(p.stderr.String(), "sink post") {
		t.Errorf("stderr does not name the sink and the reason:\n%s", p.stderr.String())
	}
	var st sinkStatus
	poll(t, "the outage in the status", p, func() bool {
		var ok bool
		st, ok = sinkStatusOf(dir)
		return ok && len(st.SinkFailures) == 1 && len(st.Failing) == 1
	})
	if f := st.SinkFailures[0]; f.Sink != "post" || !strings.Contains(f.Error, want) || !strings.Contains(f.Error, "retrying (attempt") {
		t.Errorf("sink_failures lists %+v, want sink post and %q", f, want)
	}
	if f := st.Failing[0]; !strings.Contains(f.LastError, "sink post") || !strings.Contains(f.LastError, want) {
		t.Errorf("the failing partition's last error is %q, want the sink and %q", f.LastError, want)
	}
	time.Sleep(time.Second) // several restarts: stderr summarizes them
	if c := strings.Count(p.stderr.String(), " failed: "); c != 1 || strings.Contains(p.stderr.String(), "runs healthy again") {
		t.Errorf("stderr has %d failure lines, want the first one only (then summaries), and no partition healthy\n%s", c, p.stderr.String())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 3 {
		t.Fatalf("weir run after SIGTERM exited %d, want 3 (the drain timed out)\n%s", code, p.stderr.String())
	}
	i := strings.Index(p.stderr.String(), "the drain did not finish within 2s")
	if i < 0 {
		t.Fatalf("no drain timeout on stderr:\n%s", p.stderr.String())
	}
	if tail := p.stderr.String()[i:]; !strings.Contains(tail, "FAILING: Reader") || !strings.Contains(tail, "sink post") || !strings.Contains(tail, "cannot reach") {
		t.Errorf("the drain timeout does not name the sink and its error:\n%s", tail)
	}

	// The receiver comes up at the same address: the same command
	// delivers every row (at least once: the HTTP sink's guarantee).
	got := receive(t, addr)
	again := start(t, weirBin, nil, "run", "--data", dir, "--spec", spec, "--progress", "0")
	if code := again.wait(t); code != 0 {
		t.Fatalf("rerun with the receiver up: exit %d\n%s", code, again.stderr.String())
	}
	for i := 0; i < n; i++ {
		if got.count(fmt.Sprintf("row %d", i)) == 0 {
			t.Errorf("row %d never arrived", i)
		}
	}
}

// bodies counts the request bodies a receiver got.
type bodies struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *bodies) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[s]
}

// receive serves addr until the test ends, counting POSTed bodies.
func receive(t *testing.T, addr string) *bodies {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s again: %v", addr, err)
	}
	b := &bodies{n: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.n[string(body)]++
		b.mu.Unlock()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b
}
