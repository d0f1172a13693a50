package main

// End-to-end tests of a pipeline's life across runs and of how it ends
// (issue 13, "silent or wrong outcomes" 1–3): a rerun after completion
// processes what arrived since, exactly once; failures of user code are
// reported on stderr (once, not per restart) and in the status, naming the
// poison message; SIGTERM stops within --drain-timeout even when a job
// never drains, and nothing is lost for the next run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-stream/weir/internal/testproc"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runWeir runs the binary to its end and returns its stderr and exit code.
func runWeir(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(weirBin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return errb.String(), 0
	case errors.As(err, &exit):
		return errb.String(), exit.ExitCode()
	}
	t.Fatalf("weir %v: %v", args, err)
	return "", 0
}

// writeSpec writes text to a spec file in a temporary directory.
func writeSpec(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// editSpec returns example's spec with old replaced by new once.
func editSpec(t *testing.T, example, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(exampleSpec(example))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not in the %s spec", old, example)
	}
	return string(bytes.Replace(b, []byte(old), []byte(new), 1))
}

// TestRerunAfterCompletion (issue 13 item 1), for the sync and the async
// (transactional outbox) counter examples: README's "Using it" steps
// repeated. A completed run is final, but running 'weir run' again starts
// a new run that processes the rows written since — under SIGKILLs too —
// and says so; a rerun with nothing new completes without output; a
// changed static spec is accepted on a completed pipeline and processes
// the next rows. Every key's counts stay exactly 1..n across all runs
// (positions, dedup floors and watermarks carry over: a completed
// computation's watermark is a store timestamp, so the downstream Counter
// does not drop the next run's rows as processed).
func TestRerunAfterCompletion(t *testing.T) {
	for i, example := range []string{"counter", "counter-async"} {
		t.Run(example, func(t *testing.T) { rerunAfterCompletion(t, example, uint64(21+10*i)) })
	}
}

func rerunAfterCompletion(t *testing.T, example string, seed uint64) {
	dir, want := setup(t, 4000, 60, seed)
	spec := exampleSpec(example)
	if errOut, code := runWeir(t, "run", "--data", dir, "--spec", spec, "--progress", "0"); code != 0 || !strings.Contains(errOut, "pipeline completed") {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	checkExact(t, readCounts(t, dir), want)

	writeEvents(t, dir, 3000, 60, seed+1, want)
	kills := runKilled(t, dir, spec, seed+1, 3)
	t.Logf("second run: %d SIGKILLs", kills)
	checkExact(t, readCounts(t, dir), want)

	errOut, code := runWeir(t, "run", "--data", dir, "--spec", spec, "--progress", "0")
	if code != 0 {
		t.Fatalf("rerun without new rows: exit %d\n%s", code, errOut)
	}
	for _, w := range []string{"previous run completed", "new run", "pipeline completed", "no new input"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("the rerun without new rows does not say %q:\n%s", w, errOut)
		}
	}
	checkExact(t, readCounts(t, dir), want)

	// A different static spec (Counter repartitioned) on the completed
	// pipeline: accepted, and it processes the next rows.
	eight := writeSpec(t, "eight.yson", editSpec(t, example, `"group_by" = ["key"];`, `"group_by" = ["key"]; "partition_count" = 8;`))
	writeEvents(t, dir, 2000, 60, seed+2, want)
	if errOut, code := runWeir(t, "run", "--data", dir, "--spec", eight, "--progress", "0"); code != 0 || !strings.Contains(errOut, "pipeline completed") {
		t.Fatalf("run with a changed spec: exit %d\n%s", code, errOut)
	}
	checkExact(t, readCounts(t, dir), want)
}

// userBin is a user's own weir binary (testdata/userbin: README's "Your own
// computations") with classes whose code panics, returns errors, or emits
// on an undeclared stream. Built once, on first use.
var userBin = sync.OnceValues(func() (string, error) {
	path := filepath.Join(filepath.Dir(weirBin), "userbin")
	out, err := exec.Command("go", "build", "-o", path, "./testdata/userbin").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build testdata/userbin: %v\n%s", err, out)
	}
	return path, nil
})

func mustUserBin(t *testing.T) string {
	t.Helper()
	bin, err := userBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// process is a started 'weir run'.
type process struct {
	cmd    *exec.Cmd
	stderr *testproc.Buffer
	done   chan struct{}
	err    error
}

func start(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), stderr: &testproc.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit (failing the test after a generous
// bound: a hang, not a slow run) and returns its exit code.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("weir run did not exit\n%s", p.stderr.String())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// poll calls cond until it holds, failing the test after a minute.
func poll(t *testing.T, what string, p *process, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("weir run exited while waiting for %s\n%s", what, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute\n%s", what, p.stderr.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// failingStatus is the part of 'weir pipeline status' these tests read.
type failingStatus struct {
	State   string `json:"state"`
	Failing []struct {
		Partition           string `json:"partition"`
		ConsecutiveFailures int    `json:"consecutive_failures"`
		LastError           string `json:"last_error"`
	} `json:"failing"`
	SourceErrors []struct {
		Computation         string `json:"computation"`
		ConsecutiveFailures int    `json:"consecutive_failures"`
		LastError           string `json:"last_error"`
	} `json:"source_errors"`
}

func pipelineStatus(dir string) (failingStatus, bool) {
	var st failingStatus
	out, err := exec.Command(weirBin, "pipeline", "status", "--data", dir).Output()
	return st, err == nil && json.Unmarshal(out, &st) == nil
}

// poisonSetup creates queues events (2 partitions) and out, and writes n
// rows {"key", "i"} and, after the first half, one poison row.
func poisonSetup(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", "events")
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "1", "out")
	var in strings.Builder
	for i := 0; i < n; i++ {
		if i == n/2 {
			in.WriteString(`{"key": "x", "poison": true}` + "\n")
		}
		fmt.Fprintf(&in, `{"key": "k%02d", "i": %d}`+"\n", i%20, i)
	}
	weir(t, in.String(), "queue", "write", "--data", dir, "events")
	return dir
}

// restartFast makes failed jobs restart within a fraction of a second.
const restartFast = `"dynamic_spec" = {"job_restart_backoff" = "50ms"; "job_restart_backoff_max" = "200ms"};`

// Spec fragments: the finite queue source "events", and the sink writing
// stream kept to queue out.
const (
	eventsSource = `"source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "consumer_path" = "c"; "finite" = %true}}};`
	outSink = `"sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["kept"];
            "parameters" = {"queue_path" = "out"}}};`
)

// keyedPoisonSpec: Reader (SwiftPassthrough of queue events) → rows →
// Work of class (keyed, 2 partitions) → kept → queue out.
func keyedPoisonSpec(t *testing.T, class string) string {
	return writeSpec(t, "keyed.yson", `"computations" = {
    "Reader" = {"computation_class_name" = "SwiftPassthrough"; `+eventsSource+` "output_stream_ids" = ["rows"]};
    "Work" = {"computation_class_name" = "`+class+`"; "group_by" = ["key"]; "partition_count" = 2;
        "input_stream_ids" = ["rows"]; "output_stream_ids" = ["kept"]; `+outSink+`};
};
"streams" = {"rows" = {}; "kept" = {}};
`+restartFast)
}

// sourcePoisonSpec: Work of class reads queue events itself (a
// TransformOrderedSource) → kept → queue out.
func sourcePoisonSpec(t *testing.T, class string) string {
	return writeSpec(t, "source.yson", `"computations" = {
    "Work" = {"computation_class_name" = "`+class+`"; `+eventsSource+` "output_stream_ids" = ["kept"]; `+outSink+`};
};
"streams" = {"kept" = {}};
`+restartFast)
}

// readOut returns how many times each "i" appears in queue out.
func readOut(t *testing.T, dir string) map[int]int {
	t.Helper()
	got := map[int]int{}
	sc := bufio.NewScanner(strings.NewReader(weir(t, "", "queue", "read", "--data", dir, "out")))
	for sc.Scan() {
		var row struct {
			I *int `json:"i"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.I == nil {
			t.Fatalf("out row %q (%v)", sc.Text(), err)
		}
		got[*row.I]++
	}
	return got
}

// TestUserPanicReportedAndDrainTimesOut (issue 13 item 3): a panic in user
// code on a poison message in an internal stream does not kill the process:
// the job fails, stderr shows the first failure at once — computation,
// partition, message id, panic value and the user's frame — and not once
// per restart, and 'weir pipeline status' lists the partition as failing
// with that message. The failing partition can never drain, so SIGTERM
// stops hard after --drain-timeout with exit code 3 and says why; the
// fixed code then completes the pipeline with every row exactly once.
func TestUserPanicReportedAndDrainTimesOut(t *testing.T) {
	bin := mustUserBin(t)
	const n = 400
	dir := poisonSetup(t, n)
	spec := keyedPoisonSpec(t, "Explode")
	p := start(t, bin, nil, "run", "--data", dir, "--spec", spec, "--progress", "0", "--drain-timeout", "2s")
	poll(t, "failure on stderr", p, func() bool { return strings.Contains(p.stderr.String(), "panic: poison row x") })
	first := regexp.MustCompile(`partition (Work/\d) failed: computation Work, partition Work/\d, message (\S+): panic: poison row x\n\s+at main\.explode \(.*userbin/main\.go:\d+\)`)
	m := first.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("the first failure does not name the partition, the message, the panic and the user's frame:\n%s", p.stderr.String())
	}
	part, msg := m[1], m[2]
	var st failingStatus
	poll(t, "several failures in the status", p, func() bool {
		var ok bool
		st, ok = pipelineStatus(dir)
		return ok && len(st.Failing) == 1 && st.Failing[0].ConsecutiveFailures >= 4
	})
	if f := st.Failing[0]; f.Partition != part || !strings.Contains(f.LastError, "message "+msg) || !strings.Contains(f.LastError, "panic: poison row x") {
		t.Errorf("status lists %+v, want %s failing on message %s", f, part, msg)
	}
	if c := strings.Count(p.stderr.String(), " failed: "); c != 1 {
		t.Errorf("stderr has %d failure lines after %d failures, want the first one only (then summaries)\n%s", c, st.Failing[0].ConsecutiveFailures, p.stderr.String())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 3 {
		t.Fatalf("weir run after SIGTERM exited %d, want 3 (drain timed out, stopped hard)\n%s", code, p.stderr.String())
	}
	for _, w := range []string{"the drain did not finish within 2s; FAILING: " + part, "stopping hard", "nothing is lost", "pipeline paused", "--drain-timeout"} {
		if !strings.Contains(p.stderr.String(), w) {
			t.Errorf("stderr does not say %q:\n%s", w, p.stderr.String())
		}
	}
	// The fixed code (it skips the poison row) resumes: every row once.
	fixed := start(t, bin, []string{"WEIR_TEST_DEFUSE=1"}, "run", "--data", dir, "--spec", spec, "--progress", "0")
	if code := fixed.wait(t); code != 0 {
		t.Fatalf("rerun with the fixed code: exit %d\n%s", code, fixed.stderr.String())
	}
	got := readOut(t, dir)
	for i := 0; i < n; i++ {
		if got[i] != 1 {
			t.Errorf("row %d written %d times, want once", i, got[i])
		}
	}
}

// TestUserErrorsReported (issue 13 item 3): an error returned by user code,
// and an output on an undeclared stream whose error the code dropped, fail
// the job; stderr names the poison message with its source partition and
// offset. A poison message at a source does not hold up a drain (sources
// stop reading): SIGTERM stops the pipeline, exit 0.
func TestUserErrorsReported(t *testing.T) {
	bin := mustUserBin(t)
	for _, c := range []struct{ class, want string }{
		{"Refuse", "Refuse: this row is poison"},
		{"Stray", `has no output stream "undeclared"`},
	} {
		t.Run(c.class, func(t *testing.T) {
			dir := poisonSetup(t, 20)
			p := start(t, bin, nil, "run", "--data", dir, "--spec", sourcePoisonSpec(t, c.class), "--progress", "0", "--drain-timeout", "30s")
			poll(t, "failure on stderr", p, func() bool { return strings.Contains(p.stderr.String(), c.want) })
			re := regexp.MustCompile(`partition Work@\d failed: computation Work, partition Work@\d, message \S+ \(source events, partition \d, offset \d+\): .*` + regexp.QuoteMeta(c.want))
			if !re.MatchString(p.stderr.String()) {
				t.Fatalf("the failure does not name the message and its source offset:\n%s", p.stderr.String())
			}
			poll(t, "the failure in the status", p, func() bool {
				st, ok := pipelineStatus(dir)
				return ok && len(st.Failing) > 0 && strings.Contains(st.Failing[0].LastError, c.want)
			})
			p.cmd.Process.Signal(syscall.SIGTERM)
			if code := p.wait(t); code != 0 || !strings.Contains(p.stderr.String(), "pipeline stopped") {
				t.Fatalf("SIGTERM: exit %d, want 0 and stopped\n%s", code, p.stderr.String())
			}
		})
	}
}

// TestUnreachableSourceIsAnError (issue 13 item 2): the Kafka example, made
// finite, with no broker listening. It must not complete: stderr says at
// once (without -v) that the source cannot be listed and why, the status
// lists it under source_errors with a growing count of retried listings
// (and stderr does not repeat the line per retry), and SIGTERM stops it
// within --drain-timeout with exit code 3, naming the source.
func TestUnreachableSourceIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	text := editSpec(t, "kafka", `"topic" = "page-views";`, `"topic" = "page-views"; "finite" = %true;`)
	if strings.Count(text, `"localhost:9092"`) != 2 {
		t.Fatal("the kafka example no longer names localhost:9092 twice")
	}
	text = strings.ReplaceAll(text, `"localhost:9092"`, fmt.Sprintf("%q", addr)) + "\n" + restartFast
	spec := writeSpec(t, "kafka.yson", text)
	dir := t.TempDir()
	p := start(t, weirBin, nil, "run", "--data", dir, "--spec", spec, "--progress", "0", "--drain-timeout", "2s")
	poll(t, "the listing failure on stderr", p, func() bool {
		return strings.Contains(p.stderr.String(), "cannot list the partitions of Reader's source")
	})
	if !strings.Contains(p.stderr.String(), "connection refused") {
		t.Errorf("the failure does not give the dial error:\n%s", p.stderr.String())
	}
	poll(t, "retried listings in the status", p, func() bool {
		st, ok := pipelineStatus(dir)
		return ok && st.State == "working" && len(st.SourceErrors) == 1 && st.SourceErrors[0].Computation == "Reader" &&
			st.SourceErrors[0].ConsecutiveFailures >= 3 && strings.Contains(st.SourceErrors[0].LastError, "connection refused")
	})
	if c := strings.Count(p.stderr.String(), "cannot list the partitions"); c != 1 {
		t.Errorf("stderr repeats the listing failure %d times; want once, then summaries\n%s", c, p.stderr.String())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 3 {
		t.Fatalf("weir run after SIGTERM exited %d, want 3\n%s", code, p.stderr.String())
	}
	for _, w := range []string{"FAILING: the source of Reader cannot be listed", "pipeline paused"} {
		if !strings.Contains(p.stderr.String(), w) {
			t.Errorf("stderr does not say %q:\n%s", w, p.stderr.String())
		}
	}
	if strings.Contains(p.stderr.String(), "pipeline completed") {
		t.Errorf("a pipeline whose source cannot be reached completed:\n%s", p.stderr.String())
	}
}
