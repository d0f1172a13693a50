package clickhouse_test

// AtMostOnceClickHouseSink in queue mode (at_most_once_strategy enabled)
// through the engine: at-most-once allows loss on a crash or a reported
// give-up, never on a clean stop.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/spec"
)

// queueSpec is the example spec, changed by edits, with
// AtMostOnceClickHouseSink in queue mode (suspend_destruction_duration in
// ms, total_queue_bytes_limit) instead of the batching sink.
func queueSpec(t testing.TB, host, table string, suspendMS int, limit int64, edits ...func(testing.TB, string) string) *spec.Pipeline {
	t.Helper()
	p, err := spec.Parse([]byte(queueSpecText(t, host, table, suspendMS, limit, edits...)), "spec.yson")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// queueSpecText is queueSpec's text.
func queueSpecText(t testing.TB, host, table string, suspendMS int, limit int64, edits ...func(testing.TB, string) string) string {
	t.Helper()
	s := exampleSpec(t, host, table, 100)
	for _, e := range edits {
		s = e(t, s)
	}
	const class = `"sink_class_name" = "ClickHouseBatchingSink";`
	if !strings.Contains(s, class) {
		t.Fatalf("example spec lacks %s", class)
	}
	s = strings.Replace(s, class, fmt.Sprintf(`"sink_class_name" = "AtMostOnceClickHouseSink";
                "at_most_once_strategy" = {"enabled" = %%true; "suspend_destruction_duration" = %d; "total_queue_bytes_limit" = %d;};`, suspendMS, limit), 1)
	return s
}

// TestAtMostOnceQueueCleanCompletion: a finite pipeline into the queue
// mode runs to completion with nothing failing; every row arrives, and the
// run reports no drop. The sink acknowledges each output at once and
// INSERTs it in the background (one INSERT per message), so at the
// completion most of the queue is still unsent: the run must wait for it
// rather than abandon it when suspend_destruction_duration (short here,
// 10 s by default) ends.
func TestAtMostOnceQueueCleanCompletion(t *testing.T) {
	srv := chserver.Shared(t)
	// One INSERT per message: a plain MergeTree takes them faster than a
	// replicated table (no ZooKeeper round trip).
	table := newTable(t, srv, "MergeTree() ORDER BY (key, count)")
	rows, want := events(400, 20, 5)
	status, logs := runEngine(t, queueSpec(t, srv.Host(), table, 100, 100<<20), rows, nil)
	got := counts(t, srv, table)
	arrived := 0
	for _, c := range got {
		arrived += len(c)
	}
	t.Logf("%d rows in, %d arrived; counters %+v", len(rows), arrived, status.Computations["Counter"])
	checkExact(t, got, want)
	if d := status.Computations["Counter"].SinkDropped; d != 0 {
		t.Errorf("status reports %d outputs dropped by the sink, want 0\n%s", d, strings.Join(logs, "\n"))
	}
}

// TestAtMostOnceQueueDropsReported: with a queue far smaller than what one
// epoch commits, the overflow is dropped; every drop is counted in the
// metric and the run's status (the summary line shows it) and logged with
// its count and reason, and what was not dropped arrives.
func TestAtMostOnceQueueDropsReported(t *testing.T) {
	srv := chserver.Shared(t)
	table := newTable(t, srv, "MergeTree() ORDER BY (key, count)")
	rows, _ := events(300, 10, 6)
	p := queueSpec(t, srv.Host(), table, 100, 300)
	before := metric(t, "weir_clickhouse_sink_dropped_total", "out", map[string]string{"reason": "queue_full"})
	status, logs := runEngine(t, p, rows, nil)
	dropped := status.Computations["Counter"].SinkDropped
	counted := metric(t, "weir_clickhouse_sink_dropped_total", "out", map[string]string{"reason": "queue_full"}) - before
	arrived := rowCount(t, srv, table)
	t.Logf("%d rows in, %d arrived, %d dropped (status), %v (metric)", len(rows), arrived, dropped, counted)
	if dropped == 0 || float64(dropped) != counted || arrived+int(dropped) != len(rows) {
		t.Errorf("status dropped %d, metric %v, arrived %d of %d: want the overflow dropped, counted in both, and the rest arrived",
			dropped, counted, arrived, len(rows))
	}
	var warned int
	for _, l := range logs {
		if strings.Contains(l, "dropped (at-most-once): queue_full: the queue is full (total_queue_bytes_limit 300)") {
			var n int
			fmt.Sscanf(l[strings.Index(l, "WARNING: "):], "WARNING: %d message(s)", &n)
			warned += n
		}
	}
	if warned != int(dropped) {
		t.Errorf("the warnings name %d dropped messages, the status %d", warned, dropped)
	}
}

// TestAtMostOnceQueueAbandonedAtClose: nothing listens on the host, so the
// queued INSERTs are retried (they never started) until Close, which waits
// suspend_destruction_duration and gives the queue up: every message is
// counted (metric reason abandoned_at_close, the computation's dropped
// outputs) and logged with the count, not lost silently.
func TestAtMostOnceQueueAbandonedAtClose(t *testing.T) {
	addr := unusedAddr(t) // refused from now on
	sp := withSinkID(sinkParams(addr, "t", nil), "amo-abandoned")
	sp.AtMostOnce = &connector.AtMostOnceStrategy{Enabled: true, TotalQueueBytesLimit: 1 << 20, SuspendDestructionDuration: 200 * time.Millisecond}
	s, err := clickhouse.NewAtMostOnceSink(sp, clickhouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	var reported atomic.Int64
	sc := connector.SinkContext{PartitionID: "Counter/0", SinkID: "amo-abandoned",
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, args...))
		},
		Dropped: func(n int) { reported.Add(int64(n)) }}
	if err := s.Init(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	msgs := keyed(1, 5, 2, map[string]int{})
	for _, m := range msgs {
		s.Distribute(m, func(error) {})
	}
	if err := s.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	s.Commit(context.Background())
	if q := s.Queued(); q != 5 {
		t.Errorf("Queued() = %d after the commit, want 5 (the partition must not look quiet)", q)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("Close took %v; want suspend_destruction_duration (200ms), then give up", d)
	}
	if n := reported.Load(); n != 5 {
		t.Errorf("%d drops reported to the pipeline, want 5", n)
	}
	if m := metric(t, "weir_clickhouse_sink_dropped_total", "amo-abandoned", map[string]string{"reason": "abandoned_at_close"}); m != 5 {
		t.Errorf("dropped metric (abandoned_at_close) %v, want 5", m)
	}
	mu.Lock()
	text := strings.Join(logs, "\n")
	mu.Unlock()
	if !strings.Contains(text, "WARNING: 5 message(s) dropped (at-most-once): abandoned_at_close") {
		t.Errorf("no warning with the count and reason:\n%s", text)
	}
}

// TestAtMostOnceQueueCrashesNoDuplicate: jobs crash at every named point
// of the epoch. The counts also feed a downstream computation, so an
// output stays in the Counter's outbox until that one acknowledges it, and
// a crash before its erase committed reloads it; the queue of the crashed
// job may have inserted it already, so the next job must not hand it to
// the sink again (connector.AtMostOnce): no count may appear twice.
func TestAtMostOnceQueueCrashesNoDuplicate(t *testing.T) {
	srv := chserver.Shared(t)
	table := newTable(t, srv, "MergeTree() ORDER BY (key, count)")
	rows, want := events(400, 20, 8)
	p := queueSpec(t, srv.Host(), table, 2000, 100<<20, withTail)
	p.Dynamic.JobRestartBackoff = spec.Duration(10 * time.Millisecond)
	p.Dynamic.JobRestartBackoffMax = spec.Duration(100 * time.Millisecond)
	crashes := enginetest.NewCrashes(8, 0.15, 25)
	status, _ := runEngine(t, p, rows, crashes)
	lost := checkNoDuplicate(t, counts(t, srv, table), want)
	if crashes.Total() == 0 {
		t.Error("no crash injected: the run proves nothing")
	}
	t.Logf("crashes %v; %d counts lost (allowed after a crash), %d reported dropped", crashes.Injected, lost, status.Computations["Counter"].SinkDropped)
}

// withTail adds a computation reading the counts (a Passthrough to an
// unread stream) to the example spec.
func withTail(t testing.TB, s string) string {
	t.Helper()
	for _, r := range [][2]string{
		{"};\n\"streams\" = {", `    "Tail" = {
        "computation_class_name" = "Passthrough";
        "group_by" = ["key"];
        "input_stream_ids" = ["counts"];
        "output_stream_ids" = ["tail"];
    };
};
"streams" = {`},
		{`"counts" = {};`, `"counts" = {}; "tail" = {};`},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("example spec lacks %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// TestAtMostOnceQueueHardStopReported: nothing listens on the sink's host
// (connection refused: the INSERTs never start and are retried), so the
// queue cannot drain: a drain (stop) waits for it instead of stopping and
// abandoning it, and the run is stopped hard (as weir run does when
// --drain-timeout passes). Each sink's Close waits
// suspend_destruction_duration — longer than the engine allowed a stopping
// job before (the controller's lost_job_timeout, then 5 s per worker) —
// and gives the queue up; by the time Run returns (and weir run prints its
// summary) every queued message must be counted as dropped.
func TestAtMostOnceQueueHardStopReported(t *testing.T) {
	addr := unusedAddr(t) // refused from now on
	rows, _ := events(60, 5, 9)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One worker, a removed job waited for 1 s: 6 s in all before, below
	// suspend_destruction_duration (7 s).
	p := queueSpec(t, addr, "t", 7000, 100<<20)
	p.Dynamic.WorkerCount = 1
	p.Dynamic.LostJobTimeout = spec.Duration(time.Second)
	e, logs := newEngine(t, ctx, p, rows, nil)
	var stateAfterStop controller.State
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for e.Status().Computations["Counter"].Outputs < uint64(len(rows)) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := e.Controller().SetTarget(controller.Stopped); err != nil {
			t.Error(err)
		}
		time.Sleep(time.Second)
		stateAfterStop = e.Controller().State()
		e.Controller().Halt()
	}()
	start := time.Now()
	state, err := e.Run(ctx)
	if err != nil {
		t.Fatalf("run ended in %s: %v", state, err)
	}
	if stateAfterStop != controller.Draining {
		t.Errorf("state %s a second after the stop, want draining: the drain must wait for the queue", stateAfterStop)
	}
	d := e.Status().Computations["Counter"].SinkDropped
	t.Logf("state %s after %v (%s a second after the stop); %d of %d outputs reported dropped", state, time.Since(start).Round(time.Millisecond), stateAfterStop, d, len(rows))
	if d != uint64(len(rows)) {
		t.Errorf("%d outputs reported dropped when Run returned, want all %d (none could be inserted)\n%s", d, len(rows), strings.Join(logs(), "\n"))
	}
}

// TestWeirRunReportsDrops: the real weir run, to completion, with a queue
// too small for an epoch's outputs: it exits 0 and its summary line says
// how many outputs the sink dropped — exactly the rows missing from the
// table — instead of "0 failed, 0 lost" alone.
func TestWeirRunReportsDrops(t *testing.T) {
	srv := chserver.Shared(t)
	bin := buildWeir(t)
	table := newTable(t, srv, "MergeTree() ORDER BY (key, count)")
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yson")
	if err := os.WriteFile(specPath, []byte(queueSpecText(t, srv.Host(), table, 1000, 300)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	runWeir(t, bin, "", "queue", "create", "--data", data, "--partitions", "3", "events")
	rows, _ := events(300, 10, 11)
	var in strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&in, `{"key": %q, "i": %d}`+"\n", r["key"], r["i"])
	}
	runWeir(t, bin, in.String(), "queue", "write", "--data", data, "events")
	cmd := exec.Command(bin, "run", "--data", data, "--spec", specPath, "--progress", "0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weir run: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`pipeline completed after .*Counter \d+ in, \d+ out, (\d+) DROPPED by at-most-once sinks`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the summary does not report the drops:\n%s", out)
	}
	dropped, _ := strconv.Atoi(string(m[1]))
	arrived := rowCount(t, srv, table)
	t.Logf("%d rows in, %d arrived; %s", len(rows), arrived, m[0])
	if dropped == 0 || arrived+dropped != len(rows) {
		t.Errorf("%d arrived and %d reported dropped of %d rows", arrived, dropped, len(rows))
	}
}
