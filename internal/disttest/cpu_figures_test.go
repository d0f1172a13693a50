package disttest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// TestCPUFigures measures, side by side on one PostgreSQL server, the
// counter example (QueueSource → Counter → SyncQueueSink, events over
// 10,000 keys) run to completion by the embedded engine (weir run --store)
// and by one weir worker + one weir controller, and reports per setup the
// rate (events over the wall time from the start of `weir run` or of the
// controller, the worker already listening, to its exit) and the CPU per
// event of each weir process (its whole life: user + system time from the
// kernel's accounting) and of the database server (its postmaster and
// backends, across the run). Each run's output passes the oracle.
//
// WEIR_DIST_BASELINE=BIN runs every setup with another weir binary too
// (built from the commit before a change), alternating which binary goes
// first from round to round; WEIR_DIST_BIN=BIN runs BIN instead of the
// work tree's build (a change alone, built from a tree without others'
// work in progress); medians of WEIR_DIST_ROUNDS rounds (default
// 3) of WEIR_DIST_EVENTS events (default 200,000). WEIR_DIST_PROFILE=DIR
// writes the worker's CPU profile (weir worker --cpuprofile) of each run
// there. Behind WEIR_DIST_FIGURES=1:
//
//	WEIR_DIST_FIGURES=1 WEIR_DIST_BASELINE=/tmp/weir-base go test -run TestCPUFigures -v -timeout 60m ./internal/disttest
func TestCPUFigures(t *testing.T) {
	figures(t)
	events := envInt(t, "WEIR_DIST_EVENTS", 200000)
	rounds := envInt(t, "WEIR_DIST_ROUNDS", 3)
	bins := figureBins()
	setups := []string{"embedded", "dist"}
	type key struct {
		bin   int
		setup string
	}
	runs := map[key][]cpuRun{}
	interleave(rounds, len(bins), func(r, b int) {
		for _, s := range setups {
			run := runCPU(t, bins[b], s, events, uint64(r), fmt.Sprintf("r%d-b%d", r, b))
			t.Logf("round %d %s %s: %s", r, binLabel(b), s, run)
			runs[key{b, s}] = append(runs[key{b, s}], run)
		}
	})
	var tb strings.Builder
	fmt.Fprintf(&tb, "| setup | binary | events/s | weir process µs/event | controller µs/event | PostgreSQL µs/event | vs embedded (events/s) |\n|---|---|---:|---:|---:|---:|---:|\n")
	for b := range bins {
		emb := medianF(field(runs[key{b, "embedded"}], func(r cpuRun) float64 { return r.rate }))
		for _, s := range setups {
			rs := runs[key{b, s}]
			rate := medianF(field(rs, func(r cpuRun) float64 { return r.rate }))
			ctl := "-"
			if s == "dist" {
				ctl = fmt.Sprintf("%.2f", medianF(field(rs, func(r cpuRun) float64 { return r.ctlUS })))
			}
			fmt.Fprintf(&tb, "| %s | %s | %.0f | %.2f | %s | %.2f | %.2f |\n", s, binLabel(b), rate,
				medianF(field(rs, func(r cpuRun) float64 { return r.mainUS })), ctl,
				medianF(field(rs, func(r cpuRun) float64 { return r.dbUS })), rate/emb)
		}
	}
	if len(bins) > 1 {
		// The machine's load moves both binaries' figures from round to
		// round; the ratio within a round, where they ran back to back,
		// moves less.
		for _, s := range setups {
			a, b := runs[key{0, s}], runs[key{1, s}]
			ratio := func(f func(cpuRun) float64) float64 {
				rs := make([]float64, len(a))
				for i := range a {
					rs[i] = f(a[i]) / f(b[i])
				}
				return medianF(rs)
			}
			fmt.Fprintf(&tb, "%s, this / baseline, median of the rounds' ratios: events/s %.2f, weir process CPU %.2f, PostgreSQL CPU %.2f\n", s,
				ratio(func(r cpuRun) float64 { return r.rate }), ratio(func(r cpuRun) float64 { return r.mainUS }), ratio(func(r cpuRun) float64 { return r.dbUS }))
		}
	}
	t.Logf("medians of %d rounds of %d events (weir process: `weir run` embedded, the worker distributed):\n%s", rounds, events, tb.String())
}

// figureBins returns the binaries a figures test compares: this build (or
// WEIR_DIST_BIN), then WEIR_DIST_BASELINE if set.
func figureBins() []string {
	bins := []string{weirBin}
	if b := os.Getenv("WEIR_DIST_BIN"); b != "" {
		bins[0] = b
	}
	if b := os.Getenv("WEIR_DIST_BASELINE"); b != "" {
		bins = append(bins, b)
	}
	return bins
}

// interleave calls run for every round and binary, alternating which
// binary goes first from round to round (the machine's noise then falls
// on both).
func interleave(rounds, bins int, run func(round, bin int)) {
	for r := 0; r < rounds; r++ {
		for i := 0; i < bins; i++ {
			run(r, (i+r)%bins)
		}
	}
}

func binLabel(b int) string {
	if b == 0 {
		return "this"
	}
	return "baseline"
}

func field(rs []cpuRun, f func(cpuRun) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// cpuRun is one run of TestCPUFigures: the rate, and CPU per event of the
// main weir process (weir run, or the worker), of the controller and of
// the database server.
type cpuRun struct {
	rate                float64
	mainUS, ctlUS, dbUS float64
	wall                time.Duration
}

func (r cpuRun) String() string {
	return fmt.Sprintf("%v, %.0f events/s, weir %.2f µs/event, controller %.2f, PostgreSQL %.2f", r.wall.Round(time.Millisecond), r.rate, r.mainUS, r.ctlUS, r.dbUS)
}

// runCPU runs the counter over n events in setup "embedded" or "dist" with
// the weir binary bin on a fresh schema of the shared server. The schema,
// the queues, the input and the check of the output go through bin's own
// commands (store init, queue create|write|read), so that a baseline of
// another schema version runs on a schema of its own version.
func runCPU(t *testing.T, bin, setup string, n int, seed uint64, tag string) cpuRun {
	t.Helper()
	base := pgtest.URL(t)
	url := pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base))
	want := cliCounter(t, bin, url, n, cpuKeys(t), seed)
	var w *proc
	if setup == "dist" {
		ports, err := testproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--id", "w0"}
		if dir := os.Getenv("WEIR_DIST_PROFILE"); dir != "" {
			args = append(args, "--cpuprofile", filepath.Join(dir, tag+"-worker.pprof"))
		}
		w = startBin(t, bin, "worker", args...)
		w.await(t, "listening on", time.Minute)
	}
	db0 := serverCPU(t)
	began := time.Now()
	var p *proc
	if setup == "embedded" {
		p = startBin(t, bin, "run", "run", "--store", url, "--spec", counterSpec(), "--progress", "0")
	} else {
		p = startBin(t, bin, "controller", "controller", "--store", url, "--spec", counterSpec())
	}
	if err := p.wait(t, 10*time.Minute); err != nil {
		t.Fatalf("%s: %v\n%s", setup, err, p.out.String())
	}
	wall := time.Since(began)
	db := serverCPU(t) - db0
	r := cpuRun{wall: wall, rate: float64(n) / wall.Seconds(), dbUS: perEvent(db, n)}
	if w != nil {
		w.stop(t)
		r.mainUS, r.ctlUS = perEvent(processCPU(w), n), perEvent(processCPU(p), n)
	} else {
		r.mainUS = perEvent(processCPU(p), n)
	}
	checkCLICounts(t, bin, url, want)
	return r
}

// weirCLI runs bin with args (stdin from the file in, if not "") and
// returns its standard output; it fails t if bin fails.
func weirCLI(t *testing.T, bin, in string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("weir %s: %v\n%s", strings.Join(args[:2], " "), err, stderr.String())
	}
	return out
}

// cliCounter creates the counter's store and queues at url with bin and
// writes n events over keys (seeded) into events; it returns the number of
// events per key.
func cliCounter(t *testing.T, bin, url string, n, keys int, seed uint64) map[string]int {
	t.Helper()
	weirCLI(t, bin, "", "store", "init", "--store", url)
	weirCLI(t, bin, "", "queue", "create", "--store", url, "--partitions", "4", "events")
	weirCLI(t, bin, "", "queue", "create", "--store", url, "--partitions", "2", "counts")
	r := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int{}
	var b strings.Builder
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%03d", r.IntN(keys))
		want[k]++
		fmt.Fprintf(&b, "{\"key\": %q, \"i\": %d}\n", k, i)
	}
	in := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	weirCLI(t, bin, in, "queue", "write", "--store", url, "events")
	return want
}

// checkCLICounts reads the queue counts at url with bin and checks that
// every key was counted 1..want[key] exactly once.
func checkCLICounts(t *testing.T, bin, url string, want map[string]int) {
	t.Helper()
	got := map[string][]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(weirCLI(t, bin, "", "queue", "read", "--store", url, "counts"))), "\n") {
		var row struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("weir queue read: %q: %v", line, err)
		}
		got[row.Key] = append(got[row.Key], row.Count)
	}
	for k := range got {
		slices.Sort(got[k])
	}
	if bad := testconn.ExactlyOnce(got, want); len(bad) > 0 {
		t.Fatalf("exactly-once violated: %v", bad[:min(5, len(bad))])
	}
}

func perEvent(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

// processCPU is an exited process's user + system time.
func processCPU(p *proc) time.Duration {
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time the shared PostgreSQL server has used so far:
// its postmaster's own and its exited children's (reaped by it), and its
// live children's (backends, background processes), from /proc.
func serverCPU(t *testing.T) time.Duration {
	t.Helper()
	s := pgtest.Shared()
	if s == nil {
		return 0 // DATABASE_URL: the server is not ours to measure
	}
	pid := s.PID()
	ticks := func(f []string, i ...int) int64 {
		var n int64
		for _, j := range i {
			v, _ := strconv.ParseInt(f[j], 10, 64)
			n += v
		}
		return n
	}
	var total int64
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		q, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(q)
		if f == nil {
			continue
		}
		// Fields after the command: f[0] is state (field 3), so field k is f[k-3].
		ppid, _ := strconv.Atoi(f[1])
		switch {
		case q == pid:
			total += ticks(f, 11, 12, 13, 14) // utime stime cutime cstime
		case ppid == pid:
			total += ticks(f, 11, 12)
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// procStat returns the fields of /proc/PID/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil
	}
	return f
}

// cpuKeys is the number of keys of TestCPUFigures' events:
// WEIR_DIST_KEYS, default 50 (as TestThroughputFigures; `weir bench`'s
// rows use 10,000, which makes the run bound by the database's state
// upserts).
func cpuKeys(t *testing.T) int { return envInt(t, "WEIR_DIST_KEYS", 50) }
