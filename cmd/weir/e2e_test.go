package main

// End-to-end tests through the real weir binary: queues are created and
// written with 'weir queue', the pipeline runs with 'weir run', is killed
// with SIGKILL at random moments and started again until it completes, and
// the output queue is read back with 'weir queue read' and checked against
// the exactly-once oracle.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

var weirBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	weirBin = filepath.Join(dir, "weir")
	out, err := exec.Command("go", "build", "-o", weirBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build weir: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if s := pgtest.Shared(); s != nil { // started by the distributed console test
		s.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// weir runs the binary and returns stdout; it fails the test on error.
func weir(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(weirBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// setup creates the data dir with queues events and counts and writes n
// events over keys; it returns the expected count per key.
func setup(t *testing.T, n, keys int, seed uint64) (string, map[string]int) {
	t.Helper()
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "3", "events")
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", "counts")
	want := map[string]int{}
	writeEvents(t, dir, n, keys, seed, want)
	return dir, want
}

// writeEvents writes n more events over keys to dir's queue events and
// adds them to want.
func writeEvents(t *testing.T, dir string, n, keys int, seed uint64, want map[string]int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var in strings.Builder
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%03d", r.IntN(keys))
		want[k]++
		fmt.Fprintf(&in, `{"key": %q, "i": %d}`+"\n", k, i)
	}
	out := weir(t, in.String(), "queue", "write", "--data", dir, "events")
	if !strings.Contains(out, fmt.Sprintf("wrote %d rows", n)) {
		t.Fatalf("queue write said %q", out)
	}
}

func exampleSpec(name string) string { return filepath.Join("..", "..", "examples", name, "spec.yson") }

// smallEpochSpec writes a variant of example name into dir whose
// computations take at most 20 rows per epoch, and returns its path: a run
// of a few thousand events then lasts long enough to be SIGKILLed while it
// works (with the example's 1,000-row epochs it ends in a fraction of a
// second).
func smallEpochSpec(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(exampleSpec(name))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`("computation_class_name" = "[A-Za-z]+";)`)
	variant := re.ReplaceAllString(string(b), `$1 "max_rows_per_batch" = 20;`)
	if variant == string(b) {
		t.Fatalf("example %s: no computation to give small epochs", name)
	}
	path := filepath.Join(dir, "small-epochs.yson")
	if err := os.WriteFile(path, []byte(variant), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runKilled runs 'weir run' and SIGKILLs it after a random delay, again and
// again, until a run exits 0 by itself. It returns the number of kills.
func runKilled(t *testing.T, dir, spec string, seed uint64, maxKills int) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	kills := 0
	for attempt := 0; ; attempt++ {
		if attempt > maxKills+20 {
			t.Fatalf("the pipeline did not complete after %d runs", attempt)
		}
		cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", spec, "--progress", "0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var delay <-chan time.Time
		if kills < maxKills {
			delay = time.After(time.Duration(50+r.IntN(400)) * time.Millisecond)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("weir run failed: %v\n%s", err, stderr.String())
			}
			return kills
		case <-delay:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("weir run hung\n%s", stderr.String())
		}
	}
}

// readCounts reads the counts queue through the CLI.
func readCounts(t *testing.T, dir string) map[string][]int64 {
	t.Helper()
	out := weir(t, "", "queue", "read", "--data", dir, "counts")
	got := map[string][]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
			Tab   *int64 `json:"$tablet_index"`
			Row   *int64 `json:"$row_index"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("queue read line %q: %v", sc.Text(), err)
		}
		if row.Tab == nil || row.Row == nil {
			t.Fatalf("queue read line lacks $tablet_index/$row_index: %s", sc.Text())
		}
		got[row.Key] = append(got[row.Key], row.Count)
	}
	return got
}

func checkExact(t *testing.T, got map[string][]int64, want map[string]int) {
	t.Helper()
	for k, n := range want {
		seen := map[int64]int{}
		for _, c := range got[k] {
			seen[c]++
		}
		for i := 1; i <= n; i++ {
			if seen[int64(i)] != 1 {
				t.Errorf("key %s: count %d appears %d times (want once; n=%d)", k, i, seen[int64(i)], n)
				break
			}
		}
		if len(got[k]) != n {
			t.Errorf("key %s: %d outputs, want %d", k, len(got[k]), n)
		}
		if len(got[k]) != n || len(seen) != n {
			t.Logf("key %s: the counts in output order: %s", k, countRuns(got[k]))
		}
	}
}

// countRuns shows counts as runs of consecutive values ("1-35 12-20 36-40"):
// a failure's shape (a repeated stretch, a gap, a tail cut off) at a glance.
func countRuns(counts []int64) string {
	var b strings.Builder
	for i := 0; i < len(counts); {
		j := i
		for j+1 < len(counts) && counts[j+1] == counts[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", counts[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", counts[i], counts[j])
		}
		i = j + 1
	}
	return b.String()
}

// TestKillAndRerunExactlyOnce: for the sync and async counter examples and
// word count, SIGKILL the process at random moments and rerun the same
// command until the pipeline completes; every key's counts are exactly 1..n.
func TestKillAndRerunExactlyOnce(t *testing.T) {
	for i, name := range []string{"counter", "counter-async"} {
		t.Run(name, func(t *testing.T) {
			dir, want := setup(t, 20000, 200, uint64(i))
			kills := runKilled(t, dir, smallEpochSpec(t, dir, name), uint64(i), 6)
			t.Logf("%d SIGKILLs before completion", kills)
			if kills == 0 {
				t.Errorf("no SIGKILL landed before the run completed: the test proves nothing")
			}
			checkExact(t, readCounts(t, dir), want)
		})
	}
}

// TestAtLeastOnceExample: counter-alo under SIGKILLs never loses a count.
func TestAtLeastOnceExample(t *testing.T) {
	dir, want := setup(t, 20000, 100, 9)
	runKilled(t, dir, smallEpochSpec(t, dir, "counter-alo"), 9, 4)
	got := readCounts(t, dir)
	extra := 0
	for k, n := range want {
		seen := map[int64]bool{}
		for _, c := range got[k] {
			seen[c] = true
		}
		for i := 1; i <= n; i++ {
			if !seen[int64(i)] {
				t.Errorf("key %s: count %d lost", k, i)
				break
			}
		}
		extra += len(got[k]) - n
	}
	t.Logf("%d outputs beyond the exact counts", extra)
}

// TestSigtermDrains: SIGTERM drains and stops cleanly (exit 0, state
// stopped); rerunning the same command resumes and completes exactly once.
func TestSigtermDrains(t *testing.T) {
	dir, want := setup(t, 30000, 50, 3)
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir run after SIGTERM: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "pipeline stopped") && !strings.Contains(stderr.String(), "pipeline completed") {
		t.Fatalf("SIGTERM did not stop the pipeline cleanly:\n%s", stderr.String())
	}
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	checkExact(t, readCounts(t, dir), want)
}

// TestPipelineCommands: while 'weir run' runs, 'weir pipeline status'
// reports JSON, 'weir queue read' works through the admin API, and 'weir
// pipeline stop' drains it so that it exits 0.
func TestPipelineCommands(t *testing.T) {
	dir, _ := setup(t, 1000, 10, 4)
	// An infinite source keeps the pipeline running until stopped.
	spec := infiniteSpec(t)
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", spec, "--progress", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var status string
	for i := 0; i < 200; i++ {
		out, err := exec.Command(weirBin, "pipeline", "status", "--data", dir).Output()
		if err == nil {
			status = string(out)
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	var st struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil || st.State == "" {
		t.Fatalf("pipeline status = %q (%v)\n%s", status, err, stderr.String())
	}
	// Queue commands go through the admin API while the store is held.
	weir(t, "{\"key\": \"late\"}\n", "queue", "write", "--data", dir, "events")
	if out := weir(t, "", "queue", "read", "--data", dir, "--limit", "1", "events"); !strings.Contains(out, "$row_index") {
		t.Fatalf("queue read through the admin API: %q", out)
	}
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir run after pipeline stop: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "pipeline stopped") {
		t.Fatalf("not stopped:\n%s", stderr.String())
	}
}

// TestQueueWriteRejectsMalformed: a malformed line rejects the whole write
// with its line number, and nothing is written.
func TestQueueWriteRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", "q")
	cmd := exec.Command(weirBin, "queue", "write", "--data", dir, "q")
	cmd.Stdin = strings.NewReader("{\"a\": 1}\n{\"b\": 2}\n{not json}\n{\"c\": 3}\n")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "line 3") || !strings.Contains(string(out), "nothing was written") {
		t.Fatalf("malformed write: err %v, output %q", err, out)
	}
	if got := weir(t, "", "queue", "read", "--data", dir, "q"); got != "" {
		t.Fatalf("rows were written despite the error: %q", got)
	}
	missing := exec.Command(weirBin, "queue", "write", "--data", dir, "nope")
	missing.Stdin = strings.NewReader("{}\n")
	out, err = missing.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"nope"`) {
		t.Fatalf("write to a missing queue: err %v, output %q", err, out)
	}
}

// TestHelp: every command answers --help with exit 0 and a usage text.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"demo", "--help"}, {"queue", "--help"},
		{"queue", "write", "--help"}, {"pipeline", "--help"}} {
		cmd := exec.Command(weirBin, args...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage") {
			t.Errorf("weir %v: err %v, output %q", args, err, out)
		}
	}
}

// TestDemo runs 'weir demo' small and checks its verified summary.
func TestDemo(t *testing.T) {
	out := weir(t, "", "demo", "--events", "5000", "--keys", "50", "--seed", "1")
	for _, want := range []string{"duplicates:  0", "losses:      0", "verified:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo summary lacks %q:\n%s", want, out)
		}
	}
}

// TestStaticSpecChangeNeedsStop (issue 11, scenario 6) through the real
// binary: after a SIGKILL (state working), 'weir run' with a changed
// static field (experimental_enable_non_uint_key; a partition_count is a
// rescale, not refused) exits non-zero naming the field; the old spec with
// target_state stopped drains the pipeline; then the new spec runs to
// completion with every count exact.
func TestStaticSpecChangeNeedsStop(t *testing.T) {
	dir, want := setup(t, 20000, 100, 12)
	b, err := os.ReadFile(exampleSpec("counter"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	replace := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("%q not in the counter spec", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	infinite := replace(string(b), `"finite" = %true;`, `"finite" = %false;`)
	oldSpec := write("old.yson", infinite)
	stopSpec := write("stop.yson", infinite+"\n\"dynamic_spec\" = {\"target_state\" = \"stopped\"};\n")
	changed := `"group_by" = ["key"]; "experimental_enable_non_uint_key" = %true;`
	newSpec := write("new.yson", replace(string(b), `"group_by" = ["key"];`, changed))

	// Run the old spec and kill it while it works.
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", oldSpec, "--progress", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(weirBin, "pipeline", "status", "--data", dir).Output()
		var st struct {
			Computations map[string]struct{ Inputs uint64 } `json:"computations"`
		}
		if err == nil && json.Unmarshal(out, &st) == nil && st.Computations["Counter"].Inputs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no input counted in 30s\n%s", stderr.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	refused := exec.Command(weirBin, "run", "--data", dir, "--spec", newSpec, "--progress", "0")
	out, err := refused.CombinedOutput()
	if err == nil {
		t.Fatalf("weir run accepted a static change of an undrained pipeline:\n%s", out)
	}
	for _, w := range []string{"computations.Counter.experimental_enable_non_uint_key: (unset) → true", "not stopped", "target_state = stopped"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("the refusal does not say %q:\n%s", w, out)
		}
	}
	if out := weir(t, "", "run", "--data", dir, "--spec", stopSpec, "--progress", "0"); out != "" {
		t.Logf("drain run: %s", out)
	}
	weir(t, "", "run", "--data", dir, "--spec", newSpec, "--progress", "0")
	checkExact(t, readCounts(t, dir), want)
}

// TestMemtableFlag: --memtable-mib sizes the embedded store's memtables
// (Pebble records it in the store's OPTIONS file), and the run with small
// ones — flushes during the run — counts exactly once.
func TestMemtableFlag(t *testing.T) {
	dir, want := setup(t, 5000, 50, 3)
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0", "--memtable-mib", "1")
	checkExact(t, readCounts(t, dir), want)
	opts, err := filepath.Glob(filepath.Join(dir, "store", "OPTIONS-*"))
	if err != nil || len(opts) == 0 {
		t.Fatalf("no OPTIONS file in the store: %v", err)
	}
	b, err := os.ReadFile(opts[len(opts)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "mem_table_size=1048576") {
		t.Fatalf("%s does not record a 1 MiB memtable", opts[len(opts)-1])
	}
}
