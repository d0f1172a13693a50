package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-stream/weir/examples"
)

// Process-level chaos (testing plan L3): the real weir binary runs an
// example spec on a data directory and is SIGKILLed at random moments and
// restarted with the same command, or SIGSTOPped for longer than its lease
// timeout and then SIGCONTed. A concurrent observer reads the output queue
// with `weir queue read` (through the running process's admin API) while
// it runs; at the end the whole queue is read the same way and checked.
//
// What SIGSTOP proves in embedded mode, and what it does not. One process
// holds the controller, every job and the store, so SIGSTOP freezes all of
// them together: no replacement job can start while the zombie is frozen,
// and no other process can open the store (Pebble's directory lock).
// Leases live in the store's memory and expire by its wall clock, so after
// SIGCONT every lease is past its timeout. What the episode proves: (1)
// expiry is decided at commit time by the store's clock — a job that
// resumes mid-epoch cannot commit with its expired lease, even before the
// controller has noticed (such rejections are counted from the log); (2)
// the controller recovers by itself — it finds the expired leases, replaces
// the jobs, and the output stays exactly-once with nothing visible that
// later vanishes. What it does not prove: fencing against a replacement
// running concurrently in another process, or lease safety under clock
// skew between processes. The in-process simulation covers the first
// (zombie episodes: a frozen job, its replacement running and committing,
// then the zombie resumed); the second needs the distributed store.

// ProcessExamples are the examples process-level chaos runs.
var ProcessExamples = []string{"counter", "counter-async", "external-state"}

// ProcessConfig configures one process-level chaos run.
type ProcessConfig struct {
	// Bin is the weir binary; Dir a fresh data directory.
	Bin, Dir string
	// Example is "counter" (SyncQueueSink), "counter-async" (AsyncQueueSink)
	// or "external-state" (counts in an external state table, checked too).
	Example string
	Events  int
	Keys    int
	Seed    uint64
	// Kills and Stops are how many SIGKILLs and SIGSTOP episodes to inject.
	Kills, Stops int
	// LeaseTimeout of the spec variant (its dynamic_spec); a SIGSTOP lasts
	// longer than it.
	LeaseTimeout time.Duration
	// Logf receives progress lines (nil: none).
	Logf func(format string, args ...any)
}

// ProcessResult is what a process-level run found.
type ProcessResult struct {
	Config                       ProcessConfig
	Kills, Stops, Lives          int
	Events, Outputs              int
	Lost, Duplicated, Unexpected int
	// Observed rows (seen while running); C3 rows that later vanished or
	// changed.
	Observed, C3 int
	// LeasesExpired: leases the controllers found expired (after SIGCONT);
	// ZombieRejected: job commits or lease probes the store rejected
	// because the job's lease had expired or been aborted (from the logs).
	LeasesExpired, ZombieRejected int
	// KillRecovery: SIGKILL → first epoch commit of the restarted process;
	// StopRecovery: SIGCONT → the next epoch commit.
	KillRecovery, StopRecovery []time.Duration
	Violations                 []string
	Elapsed                    time.Duration
	// Log is the tail of the processes' stderr (on failure, or always with
	// WEIR_CHAOS_DEBUG=1).
	Log string
}

// Failed reports whether a check failed.
func (r *ProcessResult) Failed() bool { return len(r.Violations) > 0 }

// Summary is a one-line account.
func (r *ProcessResult) Summary() string {
	return fmt.Sprintf("%s seed %d: %d events → %d outputs in %.1fs, %d lives; %d SIGKILL, %d SIGSTOP (leases expired %d, zombie commits rejected %d); lost %d dup %d unexpected %d; observed %d, vanished %d; recovery kill p50 %s p99 %s, stop p50 %s",
		r.Config.Example, r.Config.Seed, r.Events, r.Outputs, r.Elapsed.Seconds(), r.Lives, r.Kills, r.Stops, r.LeasesExpired, r.ZombieRejected,
		r.Lost, r.Duplicated, r.Unexpected, r.Observed, r.C3,
		ms(Percentile(r.KillRecovery, .5)), ms(Percentile(r.KillRecovery, .99)), ms(Percentile(r.StopRecovery, .5)))
}

// proc is a running process-level chaos run.
type proc struct {
	cfg ProcessConfig
	res *ProcessResult
	rnd *rand.Rand

	spec     string
	want     map[string]int
	mu       sync.Mutex // held while a `weir queue read` or a kill/start runs
	seen     map[rowID]outRow
	next     []uint64
	stderr   bytes.Buffer
	stderrMu sync.Mutex
	vmu      sync.Mutex // guards res.Violations (the observer reports too)
}

func (p *proc) logf(format string, args ...any) {
	if p.cfg.Logf != nil {
		p.cfg.Logf(format, args...)
	}
}

func (p *proc) violate(format string, args ...any) {
	p.vmu.Lock()
	defer p.vmu.Unlock()
	p.res.Violations = append(p.res.Violations, fmt.Sprintf(format, args...))
}

// weir runs the binary to completion and returns its stdout.
func (p *proc) weir(stdin string, args ...string) (string, error) {
	cmd := exec.Command(p.cfg.Bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("weir %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// RunProcess runs one process-level chaos run.
func RunProcess(ctx context.Context, cfg ProcessConfig) *ProcessResult {
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = time.Second
	}
	p := &proc{cfg: cfg, res: &ProcessResult{Config: cfg, Events: cfg.Events}, rnd: rand.New(rand.NewPCG(cfg.Seed, 0xd1e)),
		seen: map[rowID]outRow{}, next: make([]uint64, 2)}
	start := time.Now()
	if err := p.setup(); err != nil {
		p.violate("setup: %v", err)
		return p.res
	}
	p.run(ctx)
	p.final()
	p.res.Elapsed = time.Since(start)
	p.stderrMu.Lock()
	log := p.stderr.String()
	p.stderrMu.Unlock()
	p.res.ZombieRejected = len(zombieRejection.FindAllString(log, -1))
	if p.res.Failed() || os.Getenv("WEIR_CHAOS_DEBUG") != "" {
		lines := strings.Split(log, "\n")
		p.res.Log = strings.Join(lines[max(0, len(lines)-40):], "\n")
	}
	return p.res
}

// zombieRejection matches a job failure whose commit (or lease probe) the
// store refused because the job's lease had ended.
var zombieRejection = regexp.MustCompile(`(commit|lease probe): store: lease-[0-9a-f]+ is (expired|aborted)`)

func (p *proc) setup() error {
	if _, err := p.weir("", "queue", "create", "--data", p.cfg.Dir, "--partitions", "3", "events"); err != nil {
		return err
	}
	if _, err := p.weir("", "queue", "create", "--data", p.cfg.Dir, "--partitions", "2", "counts"); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(p.cfg.Seed, 1))
	p.want = map[string]int{}
	var in strings.Builder
	for i := 0; i < p.cfg.Events; i++ {
		k := fmt.Sprintf("k%03d", r.IntN(p.cfg.Keys))
		p.want[k]++
		fmt.Fprintf(&in, `{"key": %q, "i": %d}`+"\n", k, i)
	}
	if _, err := p.weir(in.String(), "queue", "write", "--data", p.cfg.Dir, "events"); err != nil {
		return err
	}
	b, err := examples.Spec(p.cfg.Example)
	if err != nil {
		return err
	}
	// The spec variant: short leases (a SIGSTOP outlives them), a fast
	// scheduler, and small epochs (the reader's too: a run that wakes at
	// once on every acknowledgement finishes 20,000 events in well under a
	// second otherwise), so that a run lasts long enough to be interrupted
	// many times.
	variant := strings.Replace(string(b), `"group_by" = ["key"];`, `"group_by" = ["key"]; "max_rows_per_batch" = 50;`, 1)
	variant = strings.Replace(variant, `"computation_class_name" = "SwiftPassthrough";`, `"computation_class_name" = "SwiftPassthrough"; "max_rows_per_batch" = 20;`, 1)
	variant += fmt.Sprintf("\n\"dynamic_spec\" = {\"lease_timeout\" = %q; \"lease_ping_period\" = %q; \"lost_job_timeout\" = %q; \"scheduler_period\" = \"50ms\"};\n",
		p.cfg.LeaseTimeout.String(), (p.cfg.LeaseTimeout / 5).String(), (p.cfg.LeaseTimeout * 3 / 5).String())
	p.spec = filepath.Join(p.cfg.Dir, "chaos-spec.yson")
	return os.WriteFile(p.spec, []byte(variant), 0o644)
}

// status is the part of the admin API's /status the run reads.
type status struct {
	State        string
	Computations map[string]struct{ Commits uint64 }
	Controller   struct{ LeasesExpired int }
}

func (s status) commits() uint64 {
	var n uint64
	for _, c := range s.Computations {
		n += c.Commits
	}
	return n
}

// getStatus reads the running weir's /status through its admin API, with
// the data directory's admin token (every request needs it).
func (p *proc) getStatus(addr string) (status, error) {
	var s status
	token, err := os.ReadFile(filepath.Join(p.cfg.Dir, "admin.token"))
	if err != nil {
		return s, err
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return s, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	c := http.Client{Timeout: time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return s, fmt.Errorf("GET /status: %s", resp.Status)
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

func (p *proc) run(ctx context.Context) {
	deadline := time.Now().Add(5*time.Minute + time.Duration(p.cfg.Events)*time.Millisecond)
	var killedAt time.Time
	for life := 1; ; life++ {
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.violate("liveness: the pipeline did not complete in %d lives", life-1)
			return
		}
		p.res.Lives = life
		addrFile := filepath.Join(p.cfg.Dir, "admin.addr")
		os.Remove(addrFile) // a SIGKILLed process leaves it behind
		cmd := exec.Command(p.cfg.Bin, "run", "--data", p.cfg.Dir, "--spec", p.spec, "--progress", "0", "-v")
		pr, pw, err := os.Pipe()
		if err != nil {
			p.violate("pipe: %v", err)
			return
		}
		cmd.Stderr = pw
		p.mu.Lock()
		err = cmd.Start()
		p.mu.Unlock()
		pw.Close()
		if err != nil {
			p.violate("start weir run: %v", err)
			return
		}
		copied := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				p.stderrMu.Lock()
				fmt.Fprintf(&p.stderr, "life %d: %s\n", life, sc.Text())
				p.stderrMu.Unlock()
			}
			close(copied)
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		// Wait for the admin API; then the observer and the recovery clock.
		var addr string
		for addr == "" {
			if b, err := os.ReadFile(addrFile); err == nil {
				// The first line is the address; the second, this run's
				// instance id (not needed for GET /status).
				addr, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
			}
			select {
			case err := <-exited:
				<-copied
				if err != nil {
					p.violate("life %d: weir run failed before serving: %v", life, err)
				}
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		if !killedAt.IsZero() {
			p.measure(addr, 0, killedAt, &p.res.KillRecovery)
			killedAt = time.Time{}
		}
		stopObs := make(chan struct{})
		obsDone := make(chan struct{})
		go p.observe(stopObs, obsDone)

		// This life's faults: the SIGSTOP episodes come first (while there
		// is plenty of work in flight), then one SIGKILL per life.
		var fault <-chan time.Time
		next := func() {
			if p.res.Stops < p.cfg.Stops || p.res.Kills < p.cfg.Kills {
				fault = time.After(time.Duration(50+p.rnd.IntN(400)) * time.Millisecond)
			}
		}
		next()
		var err2 error
		done := false
		for !done {
			select {
			case err2 = <-exited:
				done = true
			case <-fault:
				fault = nil
				if p.res.Stops < p.cfg.Stops {
					p.stopEpisode(cmd, addr)
					next()
					continue
				}
				p.mu.Lock() // no `weir queue read` in flight
				cmd.Process.Signal(syscall.SIGKILL)
				killedAt = time.Now()
				err2 = <-exited
				p.mu.Unlock()
				p.res.Kills++
				p.logf("life %d: SIGKILL", life)
				done = true
			}
		}
		close(stopObs)
		<-obsDone
		<-copied
		if !killedAt.IsZero() {
			continue
		}
		if err2 != nil {
			p.violate("life %d: weir run failed: %v", life, err2)
		}
		return // exited by itself: completed
	}
}

// stopEpisode SIGSTOPs the process for longer than its lease timeout, then
// SIGCONTs it, and measures the time to its next epoch commit.
func (p *proc) stopEpisode(cmd *exec.Cmd, addr string) {
	before, err := p.getStatus(addr)
	if err != nil {
		return // about to exit
	}
	cmd.Process.Signal(syscall.SIGSTOP)
	pause := p.cfg.LeaseTimeout + time.Duration(500+p.rnd.IntN(1000))*time.Millisecond
	time.Sleep(pause)
	cmd.Process.Signal(syscall.SIGCONT)
	contAt := time.Now()
	p.res.Stops++
	p.logf("SIGSTOP for %v, SIGCONT", pause)
	p.measure(addr, before.commits(), contAt, &p.res.StopRecovery)
	if s, err := p.getStatus(addr); err == nil {
		p.res.LeasesExpired += s.Controller.LeasesExpired - before.Controller.LeasesExpired
	}
}

// measure polls the status until the commit count passes base, and records
// the time since t0.
func (p *proc) measure(addr string, base uint64, t0 time.Time, into *[]time.Duration) {
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		s, err := p.getStatus(addr)
		if err != nil {
			return // the process exited (completed)
		}
		if s.commits() > base {
			*into = append(*into, time.Since(t0))
			return
		}
		if s.State == "completed" {
			return
		}
	}
	p.violate("no epoch commit within 30s after the fault")
}

// observe reads new output rows with `weir queue read` while the process
// runs, remembering each (C3: no row may later vanish or change).
func (p *proc) observe(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-time.After(30 * time.Millisecond):
		}
		for part := 0; part < 2; part++ {
			p.mu.Lock()
			out, err := p.weir("", "queue", "read", "--data", p.cfg.Dir, "--partition", fmt.Sprint(part), "--offset", fmt.Sprint(p.next[part]), "counts")
			p.mu.Unlock()
			if err != nil {
				continue
			}
			rows, err := parseRows(out)
			if err != nil {
				p.violate("observer: %v", err)
				continue
			}
			for _, r := range rows {
				id := rowID{r.Part, r.Index}
				if old, ok := p.seen[id]; ok && old != r {
					p.violate("C3: output row %d/%d changed from %s=%d to %s=%d while running", r.Part, r.Index, old.Key, old.Count, r.Key, r.Count)
				}
				p.seen[id] = r
				p.next[part] = max(p.next[part], r.Index+1)
			}
		}
	}
}

// parseRows parses `weir queue read` output.
func parseRows(out string) ([]outRow, error) {
	var rows []outRow
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var r struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
			Tab   *int   `json:"$tablet_index"`
			Row   *int64 `json:"$row_index"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Tab == nil || r.Row == nil {
			return nil, fmt.Errorf("queue read line %q: %v", sc.Text(), err)
		}
		rows = append(rows, outRow{Part: *r.Tab, Index: uint64(*r.Row), Key: r.Key, Count: r.Count})
	}
	return rows, sc.Err()
}

// final reads the whole output queue and checks C1 and C3.
func (p *proc) final() {
	out, err := p.weir("", "queue", "read", "--data", p.cfg.Dir, "counts")
	if err != nil {
		p.violate("final read: %v", err)
		return
	}
	rows, err := parseRows(out)
	if err != nil {
		p.violate("final read: %v", err)
		return
	}
	p.res.Outputs = len(rows)
	now := map[rowID]outRow{}
	got := map[string]map[int64]int{}
	for _, r := range rows {
		now[rowID{r.Part, r.Index}] = r
		if got[r.Key] == nil {
			got[r.Key] = map[int64]int{}
		}
		got[r.Key][r.Count]++
	}
	p.res.Observed = len(p.seen)
	for id, r := range p.seen {
		if n, ok := now[id]; !ok || n != r {
			p.res.C3++
			p.violate("C3: output row %d/%d (%s=%d), seen while running, is gone or changed", id.part, id.index, r.Key, r.Count)
		}
	}
	for k, counts := range got {
		n := int64(p.want[k])
		for c, m := range counts {
			switch {
			case c < 1 || c > n:
				p.res.Unexpected += m
				p.violate("C1: key %s: unexpected count %d", k, c)
			case m > 1:
				p.res.Duplicated += m - 1
				p.violate("C1: key %s: count %d appears %d times", k, c, m)
			}
		}
	}
	for k, n := range p.want {
		for c := int64(1); c <= int64(n); c++ {
			if got[k][c] == 0 {
				p.res.Lost++
			}
		}
	}
	if p.res.Lost > 0 {
		p.violate("C1: %d counts lost", p.res.Lost)
	}
	if p.cfg.Example == "external-state" {
		p.checkTable()
	}
}

// checkTable checks the external-state example's table key_counts, read
// with `weir table read`: every key's row holds exactly its event count
// (C2: the committed state equals the reference over the input).
func (p *proc) checkTable() {
	out, err := p.weir("", "table", "read", "--data", p.cfg.Dir, "key_counts")
	if err != nil {
		p.violate("read key_counts: %v", err)
		return
	}
	got := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			p.violate("key_counts line %q: %v", sc.Text(), err)
			return
		}
		got[r.Key] = r.Count
	}
	for k, n := range p.want {
		if got[k] != int64(n) {
			p.violate("C2: key_counts[%s] = %d, want %d", k, got[k], n)
		}
	}
	if len(got) != len(p.want) {
		p.violate("C2: key_counts has %d rows, the input %d keys", len(got), len(p.want))
	}
}

// ProcessFigures aggregate process-level runs.
type ProcessFigures struct {
	runs                          int
	Failed                        []string
	Events, Outputs               int
	Kills, Stops                  int
	Lost, Duplicated, Unexpected  int
	Observed, C3                  int
	LeasesExpired, ZombieRejected int
	KillRecovery, StopRecovery    []time.Duration
	Command                       string
}

// Add adds one run.
func (f *ProcessFigures) Add(r *ProcessResult) {
	f.runs++
	f.Events += r.Events
	f.Outputs += r.Outputs
	f.Kills += r.Kills
	f.Stops += r.Stops
	f.Lost += r.Lost
	f.Duplicated += r.Duplicated
	f.Unexpected += r.Unexpected
	f.Observed += r.Observed
	f.C3 += r.C3
	f.LeasesExpired += r.LeasesExpired
	f.ZombieRejected += r.ZombieRejected
	f.KillRecovery = append(f.KillRecovery, r.KillRecovery...)
	f.StopRecovery = append(f.StopRecovery, r.StopRecovery...)
	if r.Failed() {
		f.Failed = append(f.Failed, fmt.Sprintf("%s seed %d: %s", r.Config.Example, r.Config.Seed, r.Violations[0]))
	}
}

func (f *ProcessFigures) markdownRows(row func(name, format string, args ...any)) {
	if f.runs == 0 {
		return
	}
	row("L3 process chaos (real binary)", "%d runs of examples/counter, counter-async and external-state; %d events → %d outputs", f.runs, f.Events, f.Outputs)
	row("L3 faults: SIGKILL / SIGSTOP past the lease", "%d / %d (leases the controller found expired after SIGCONT: %d; job commits refused for an ended lease, as logged: %d)",
		f.Kills, f.Stops, f.LeasesExpired, f.ZombieRejected)
	row("L3 lost / duplicated / unexpected (output queue via `weir queue read`)", "**%d / %d / %d**", f.Lost, f.Duplicated, f.Unexpected)
	row("L3 rows seen while running that later vanished (C3)", "**%d** (of %d observed)", f.C3, f.Observed)
	row("L3 recovery, SIGKILL → first epoch commit of the restarted process", "p50 %s, p99 %s, max %s (%d)",
		ms(Percentile(f.KillRecovery, .5)), ms(Percentile(f.KillRecovery, .99)), ms(Percentile(f.KillRecovery, 1)), len(f.KillRecovery))
	row("L3 recovery, SIGCONT → next epoch commit", "p50 %s, p99 %s, max %s (%d)",
		ms(Percentile(f.StopRecovery, .5)), ms(Percentile(f.StopRecovery, .99)), ms(Percentile(f.StopRecovery, 1)), len(f.StopRecovery))
	if f.Command != "" {
		row("L3 command", "`%s`", f.Command)
	}
	if len(f.Failed) > 0 {
		row("L3 failing runs", "%s", strings.Join(f.Failed, "<br>"))
	}
}

// Runs returns the number of runs added (0 for nil).
func (f *ProcessFigures) Runs() int {
	if f == nil {
		return 0
	}
	return f.runs
}
