package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/controller"
)

// runUntil runs e until cond holds (polled, bounded by 30 s of real time)
// and returns the run's outcome channel.
func runUntil(t *testing.T, ctx context.Context, e *Engine, what string, cond func(Status) bool) <-chan controller.State {
	t.Helper()
	done := make(chan controller.State, 1)
	go func() {
		s, _ := e.Run(ctx)
		done <- s
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !cond(e.Status()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 30s; status %+v", what, e.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return done
}

// TestFailingJobShownAndRestarted: a Counter that fails on a bad message is
// restarted with backoff; /status lists the partition as failing with the
// error, the metrics carry it, and once the message can be processed every
// count is exact (the partition's data was kept).
func TestFailingJobShownAndRestarted(t *testing.T) {
	var reject atomic.Bool
	reject.Store(true)
	classes := DefaultClasses()
	counter := builtin.Counter()
	classes.MustRegister("PickyCounter", weir.Transform(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		if m.Payload["key"] == "poison" && reject.Load() {
			return errors.New("cannot count the poison key")
		}
		return counter.OnMessage(ctx, m, out)
	}))
	f := newFixture(t, 2)
	f.writeKeys(t, 500, 10, 8)
	if err := f.events.Write(context.Background(), []weir.Row{{"key": "poison"}}, []int{0}); err != nil {
		t.Fatal(err)
	}
	f.want["poison"] = 1
	p := example(t, "counter")
	p.Computations["Counter"].ComputationClassName = "PickyCounter"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := New(ctx, Config{Spec: p, Store: f.st, Classes: classes, Connectors: DefaultConnectors(), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	done := runUntil(t, ctx, e, "two failures in a row", func(s Status) bool {
		return len(s.Failing) == 1 && s.Failing[0].ConsecutiveFailures >= 2
	})
	s := e.Status()
	if !strings.Contains(s.Failing[0].LastError, "cannot count the poison key") || !strings.HasPrefix(s.Failing[0].Partition, "Counter/") {
		t.Fatalf("failing partition %+v", s.Failing[0])
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector())
	if n, err := testutil.GatherAndCount(reg, "weir_job_consecutive_failures"); err != nil || n != 1 {
		t.Errorf("weir_job_consecutive_failures series: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelled := false
	for _, mf := range mfs {
		if mf.GetName() != "weir_job_last_error" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labelled = labelled || l.GetName() == "error" && strings.Contains(l.GetValue(), "poison")
			}
		}
	}
	if !labelled {
		t.Error("weir_job_last_error carries no error label naming the poison key")
	}
	reject.Store(false)
	if state := <-done; state != controller.Completed {
		t.Fatalf("run ended in %s", state)
	}
	f.checkExactlyOnce(t)
}

// TestSinkFailureRestartsJob (issue 11, "a sink whose retries ran out stops
// its partition until the process restarts"): the HTTP receiver rejects the
// first requests; the job whose sink gave up is restarted with backoff, the
// new job sends the undelivered outputs again, and the pipeline completes.
func TestSinkFailureRestartsJob(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	rejects := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if rejects > 0 {
			rejects--
			http.Error(w, "not yet", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got[string(b)]++
	}))
	defer srv.Close()
	f := newFixture(t, 1)
	if err := f.events.Write(context.Background(), []weir.Row{{"body": "one"}, {"body": "two"}, {"body": "three"}}, []int{0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	p := httpSinkSpec(t, srv.URL, `"scheduler_period" = "20ms"; "job_restart_backoff" = "10ms"; "job_restart_backoff_max" = "100ms"`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := New(ctx, Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan controller.State, 1)
	go func() {
		s, _ := e.Run(ctx)
		done <- s
	}()
	select {
	case state := <-done:
		if state != controller.Completed {
			t.Fatalf("run ended in %s", state)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("not completed in 30s: a sink failure stopped the partition for good; status %+v", e.Status())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range []string{"one", "two", "three"} {
		if got[b] == 0 {
			t.Errorf("%q never delivered (got %v)", b, got)
		}
	}
	s := e.Status()
	if s.Controller.JobsFailed == 0 {
		t.Error("no job was counted as failed")
	}
	found := false
	for _, p := range s.Partitions {
		found = found || strings.Contains(p.LastError, "sink http stopped delivering")
	}
	if !found {
		t.Errorf("no partition names the sink failure as its last error: %+v", s.Partitions)
	}
}
