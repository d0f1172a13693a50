package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/worker"
)

// Options tune a run, not the scenario.
type Options struct {
	// Timeout is the wall-clock bound of one seed (liveness, C7); zero
	// means 60s plus one second per 1000 messages.
	Timeout time.Duration
	// PollPeriod of the observer (default 5ms).
	PollPeriod time.Duration
	// Replay is the command that replays this seed, printed with failures.
	Replay string

	// sabotage breaks a guarantee on purpose, so that the checkers' own
	// test can see them fire (TestCheckersCatchSabotage).
	sabotage sabotage
}

type sabotage int

const (
	_ sabotage = iota // no sabotage
	// sabotageAcceptZombies commits a zombie's transaction without its
	// lease prerequisite: a broken fence (C5, and C1 or C2).
	sabotageAcceptZombies
	// sabotageDropStateWrites drops Counter's state writes from epoch
	// commits: committed state falls behind the committed offsets (C4, C2).
	sabotageDropStateWrites
	// sabotageDuplicateOutput appends a copy of an output row before the
	// final check (C1 duplicated).
	sabotageDuplicateOutput
	// sabotageLoseOutput deletes the first output row of partition 0
	// before the final check (C1 lost, C3 vanished).
	sabotageLoseOutput
	// sabotageDropFrontierWrites drops the dedup frontiers from epoch
	// commits: a restarted Counter no longer knows what it processed from
	// its ordered channels and processes re-sent inputs again (C1
	// duplicated).
	sabotageDropFrontierWrites
)

// Result is what one seed's run found.
type Result struct {
	Scenario Scenario
	Stats    Stats
	// Outputs is the number of rows in the output queue at the end.
	Outputs int
	// C1: per sink, counts 1..n of a key that are missing (Lost), present
	// more than once (Duplicated, extra copies), or outside 1..n or of an
	// unknown key (Unexpected).
	Lost, Duplicated, Unexpected int
	// C2: keys whose committed Counter state differs from the reference
	// model (the number of input rows of the key).
	StateMismatches int
	// C3 and C4 violations seen by the observers and the restart checks.
	C3, C4 int
	// Violations describes the failed checks (the first 20 of each class).
	Violations []string
	// State is the final committed Counter state; Outputs per key the
	// sorted counts in the output queue (for the metamorphic comparison).
	State      map[string]int64
	OutputSets map[string][]int64
	Elapsed    time.Duration
	// Logs is the tail of the engine's log, kept for failures.
	Logs string
}

// Failed reports whether any check failed.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Report formats a failure: the violations, the scenario (seed, options
// and fault schedule), the replay command and the log tail.
func (r *Result) Report(replay string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d FAILED (%d violations):\n", r.Scenario.Seed, len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "scenario: %s\n", r.Scenario)
	fmt.Fprintf(&b, "faults injected: %s\n", r.Stats)
	fmt.Fprintf(&b, "replay: %s\n", replay)
	if r.Logs != "" {
		fmt.Fprintf(&b, "engine log (tail):\n%s\n", r.Logs)
	}
	return b.String()
}

// sim runs one scenario: a sequence of lives (process incarnations) of the
// whole engine — store, controller, workers, transport, sinks — over one
// in-memory crashable filesystem and one manual clock.
type sim struct {
	sc   Scenario
	opts Options
	in   *input
	clk  *clock.Manual
	base *vfs.MemFS

	passages                                                 passages
	crashBudget, ambiguousBudget, ackBudget, redeliverBudget budget
	stats                                                    statsBox
	recovery                                                 recoveryClock
	ledger                                                   ledger
	progress                                                 atomic.Int64
	released                                                 atomic.Int64
	// hidden names the source partition EpNewPartition... (FaultSet.NewPartition)
	// keeps out of the source's listing until released reaches revealCap;
	// revealing is set from the reveal until the controller runs a job for it.
	hidden         atomic.Pointer[string]
	revealCap      int64
	revealing      bool
	revealDeadline time.Time

	life      *life
	lives     int
	abandoned bool // the current life's store could not be closed
	// fencedZombies counts zombies of Transform partitions resumed right
	// before their commit: each must try it.
	fencedZombies int
	// fencePending: a zombie counted in fencedZombies was resumed and the
	// process has not restarted since; attemptsAtResume is ZombieAttempts
	// at that moment.
	fencePending     bool
	attemptsAtResume int

	mu         sync.Mutex
	violations []string
	nviol      int
	perClass   map[string]int
	c3, c4     int
	logs       []string
}

// life is one incarnation of the engine process.
type life struct {
	n       int
	fault   *walFault
	raw     *pstore.Store
	st      *faultStore
	hub     *transport.Hub
	board   *board.Board
	ctl     *controller.Controller
	pl      *plan.Plan
	workers []*worker.Worker
	// handovers counts the controllers that took over in this life.
	handovers int
	hooks     *hooks
	obs       *observer
	crashing  atomic.Bool // set before a power loss's clone is taken

	// panicked: Pebble panicked inside a store call; the process is dead
	// (its store is abandoned, not closed: Pebble's commit pipeline may
	// still be locked).
	panicked  atomic.Bool
	panicAt   atomic.Int64
	panicWhat atomic.Value
}

func (l *life) crashed(r any) {
	if l.panicked.CompareAndSwap(false, true) {
		l.panicAt.Store(time.Now().UnixNano())
		l.panicWhat.Store(fmt.Sprint(r))
	}
}

// Run runs sc to completion (or until its timeout) under its faults and
// returns what the checkers found.
func Run(ctx context.Context, sc Scenario, opts Options) *Result {
	if opts.PollPeriod <= 0 {
		opts.PollPeriod = 5 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60*time.Second + time.Duration(sc.Messages)*time.Millisecond
	}
	s := &sim{sc: sc, opts: opts, in: generate(sc.Seed, sc.Workload),
		clk:  clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		base: vfs.NewCrashableMem()}
	s.recovery.stats = &s.stats
	s.crashBudget.left.Store(int64(sc.CrashBudget))
	s.ambiguousBudget.left.Store(int64(sc.AmbiguousBudget))
	s.ackBudget.left.Store(int64(sc.AckBudget))
	s.redeliverBudget.left.Store(int64(sc.RedeliverBudget))
	for _, e := range sc.Episodes {
		if e.Kind == EpNewPartition {
			h := fmt.Sprintf("p%d", sc.SourcePartitions-1)
			s.hidden.Store(&h)
			s.revealCap = int64(e.At * float64(sc.Messages))
		}
	}
	start := time.Now()
	res := s.run(ctx)
	res.Elapsed = time.Since(start)
	return res
}

func (s *sim) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, fmt.Sprintf("%s life %d: ", time.Now().Format("15:04:05.000"), s.lives)+fmt.Sprintf(format, args...))
	if len(s.logs) > 400 {
		s.logs = append(s.logs[:0:0], s.logs[200:]...)
	}
}

// violate records a failed check of class C1..C7.
func (s *sim) violate(class, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nviol++
	switch class {
	case "C3":
		s.c3++
	case "C4":
		s.c4++
	}
	if s.perClass == nil {
		s.perClass = map[string]int{}
	}
	s.perClass[class]++
	if s.perClass[class] <= 20 {
		s.violations = append(s.violations, class+": "+fmt.Sprintf(format, args...))
	}
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// openStore opens the store on the current base filesystem, behind a fresh
// (disarmed) WAL fault injector.
func (s *sim) openStore() (*pstore.Store, *walFault, error) {
	wf := &walFault{maxMem: s.sc.MemTableSize}
	st, err := pstore.Open("db", pstore.Options{FS: walFS{FS: s.base, fault: wf}, Clock: s.clk, Logger: quietLogger,
		MemTableSize: s.sc.MemTableSize, TimestampReserve: time.Second})
	return st, wf, err
}

// startLife opens the store and builds and starts a new engine over it.
func (s *sim) startLife(ctx context.Context) error {
	raw, wf, err := s.openStore()
	if err != nil {
		return fmt.Errorf("open the store (life %d): %w", s.lives+1, err)
	}
	s.lives++
	l := &life{n: s.lives, fault: wf, raw: raw}
	l.st = newFaultStore(raw, s, l)
	if s.opts.sabotage != 0 {
		job.IgnoreAppliedChecks(l.st)
	}
	if s.lives == 1 {
		if _, err := queue.Create(ctx, l.st, outputQueue, s.sc.OutputPartitions); err != nil {
			raw.Close()
			return err
		}
		if s.sc.Poison > 0 {
			if _, err := queue.Create(ctx, l.st, deadQueue, 1); err != nil {
				raw.Close()
				return err
			}
		}
	} else {
		s.restCheck(ctx, l.st)
	}
	pl, err := s.plan(l.st)
	if err != nil {
		raw.Close()
		return err
	}
	l.hub = transport.NewHub(64 << 10)
	l.hub.SetRowLimit(s.sc.BufferRows)
	l.hub.SetFaults(hubFaults{sim: s})
	l.board = board.NewBoard()
	l.hooks = &hooks{sim: s}
	env := worker.Env{Plan: pl, Store: l.st, Hub: l.hub, Board: l.board, Hooks: l.hooks, Logf: s.logf}
	for i := 0; i < s.sc.Workers; i++ {
		l.workers = append(l.workers, worker.New(fmt.Sprintf("w%d", i), l.st, env))
	}
	l.pl = pl
	if l.ctl, err = s.newController(ctx, l, ""); err != nil {
		raw.Close()
		return err
	}
	l.obs = startObserver(s, l)
	s.life = l
	return nil
}

// newController builds and loads a controller of life l whose job ids
// start with prefix (a controller taking over: handover). Its plan has the
// stored layout (a rescale's), and it carries out the rescales asked for,
// as engine.New sets them up.
func (s *sim) newController(ctx context.Context, l *life, prefix string) (*controller.Controller, error) {
	stored, ok, err := controller.LoadLayout(ctx, l.st)
	if err != nil {
		return nil, err
	}
	rec, _ := controller.Reconcile(stored, ok, nil, l.pl.Layout(), false)
	pl, err := l.pl.WithLayout(rec.Counts)
	if err != nil {
		return nil, err
	}
	ctl, err := controller.New(controller.Config{
		Plan: pl, Layout: &rec, Store: l.st, Hub: l.hub, Board: l.board, Workers: worker.ForController(l.workers), JobIDPrefix: prefix,
		LeaseTimeout: s.sc.LeaseTimeout, LeasePingPeriod: s.sc.LeaseTimeout / 5, LostWorkerTimeout: s.sc.LostTimeout,
		// The simulated clock may stand still (ClockStep 0): a crashed job
		// restarts in the next cycle, as before restart backoff existed.
		RestartBackoff: -1, SourceRelistPeriod: 100 * time.Millisecond, Rand: rand.New(rand.NewPCG(s.sc.Seed, uint64(s.lives)+uint64(l.handovers)<<32)), Logf: s.logf,
	})
	if err != nil {
		return nil, err
	}
	return ctl, ctl.Load(ctx)
}

// handover replaces l's controller as a new leader of the distributed
// mode takes over (cluster/adopt.go): the old controller acts no more (a
// deposed one is fenced), and a new one loads the persisted state and is
// offered every job the workers run — zombies and jobs being removed too,
// whose aborted or expired leases controller.Adoptable refuses, as it
// refuses two jobs of one partition. The jobs it does not adopt are left
// to end on their own: their leases are dead.
func (s *sim) handover(ctx context.Context, l *life) error {
	l.handovers++
	ctl, err := s.newController(ctx, l, fmt.Sprintf("h%d.", l.handovers))
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	var offers []controller.Adoptee
	for _, w := range l.workers {
		for _, h := range w.Jobs() {
			if done, _ := h.Done(); done {
				continue
			}
			sp := h.Spec()
			offers = append(offers, controller.Adoptee{JobID: sp.JobID, Comp: sp.Comp.Name, Partition: sp.Partition,
				Lease: sp.Lease, Worker: w, Incarnation: w.Incarnation(), Handle: h})
		}
	}
	adopted := controller.Adoptable(ctx, l.st, offers, s.logf)
	if err := ctl.Adopt(adopted); err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	l.ctl = ctl
	s.logf("handover: a new controller adopts %d of %d running jobs", len(adopted), len(offers))
	s.stats.add(func(st *Stats) { st.Handovers++; st.Adopted += len(adopted) })
	return nil
}

// stopLife ends the current life as a process death would: its jobs stop
// at their next step (their hooks crash them, their store is closed), its
// transport and controller are dropped.
func (s *sim) stopLife() {
	l := s.life
	if l == nil {
		return
	}
	l.hooks.dead.Store(true)
	l.hooks.unfreeze()
	l.obs.close()
	for _, w := range l.workers {
		w.Restart()
	}
	if l.panicked.Load() {
		s.logf("abandoning the store of the crashed process")
		s.abandoned = true
	} else {
		closed := make(chan error, 1)
		go func() { closed <- l.raw.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				// A broken store may give up on calls stuck in Pebble and
				// keep its directory: the process must exit.
				s.logf("close the store: %v", err)
				s.abandoned = true
			}
		case <-time.After(30 * time.Second):
			s.violate("C7", "closing the store did not return within 30s")
			s.abandoned = true
		}
	}
	if s.abandoned {
		// The process exits; a new one finds the files as the old one left
		// them (the OS page cache outlives it) and no lock on them.
		s.base = s.base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(s.sc.Seed, uint64(s.lives)))})
		s.abandoned = false
	}
	s.life = nil
}

// restart models a process restart after a failure at t0: the current
// life ends, the base filesystem becomes crashed (if not nil: a power
// loss), and a new life starts on it.
func (s *sim) restart(ctx context.Context, why string, t0 time.Time, crashed *vfs.MemFS) error {
	s.logf("process restart: %s", why)
	if s.fencePending && s.stats.snapshot().ZombieAttempts == s.attemptsAtResume {
		// The process died before the resumed zombie reached its commit:
		// that zombie tested nothing.
		s.fencedZombies--
	}
	s.fencePending = false
	s.stopLife()
	if crashed != nil {
		s.base = crashed
	}
	s.recovery.restarting(t0)
	s.stats.add(func(st *Stats) { st.Restarts++ })
	return s.startLife(ctx)
}

// sourceWakeBackoff is the jobs' empty_batch_backoff under SourceWake: ten
// times the usual 2 ms, so that an engine that fails to wake a job is slow,
// and below the shortest lost-job timeout in real time. The store's clock
// runs up to 20 times faster than the real one (up to 20 ms a cycle of
// about a millisecond), so a job idle for the spec's default 250 ms would
// be declared lost (1 s of store time, at least 50 cycles) again and again
// (seed 350).
const sourceWakeBackoff = 20 * time.Millisecond

// plan builds the pipeline of the scenario's configuration over st.
func (s *sim) plan(st store.Store) (*plan.Plan, error) {
	c := s.sc.Config
	readerKind := weir.KindTransform
	if c.SwiftReader {
		readerKind = weir.KindSwiftMap
	}
	batch := plan.BatchPlan{MaxRows: c.BatchRows, EmptyBackoff: 2 * time.Millisecond}
	if c.SourceWake {
		batch.EmptyBackoff = sourceWakeBackoff
	}
	params := connector.SinkParams{SinkID: "out", Path: "chaos.sinks.out", Store: st,
		Parameters: map[string]any{"queue_path": outputQueue}}
	newSink := queue.NewSyncSink
	if c.AsyncSink {
		newSink = queue.NewAsyncSink
	}
	if _, err := newSink(params); err != nil {
		return nil, err
	}
	counterIn := "words"
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		readerComp: {
			Code: builtin.Passthrough(readerKind), Source: &pacedSource{Source: testconn.NewSource(s.in.parts), released: &s.released, parts: s.sc.SourcePartitions, hidden: &s.hidden}, SourceStream: "events",
			Outputs: []string{"words"}, Batch: batch, LeaseCheckPeriod: c.LeaseCheckPeriod,
		},
		counterComp: {
			Code: counterCode(c), ExternalStates: counterTables(c), GroupBy: []string{"key"}, Partitions: c.CounterPartitions,
			CompactDedup: c.Compact, Outputs: []string{"counts"}, Batch: batch, LeaseCheckPeriod: c.LeaseCheckPeriod,
			Sinks: []plan.SinkPlan{{ID: "out", InputStream: "counts", New: func() (connector.Sink, error) { return newSink(params) }}},
		},
	}}
	if c.ExtraStage {
		pl.Computations[relayComp] = &plan.CompPlan{
			Code: builtin.Passthrough(weir.KindSwiftMap), GroupBy: []string{"key"}, Partitions: 2,
			Inputs: []string{"words"}, Outputs: []string{"relayed"}, Batch: batch, LeaseCheckPeriod: c.LeaseCheckPeriod,
		}
		counterIn = "relayed"
	}
	pl.Computations[counterComp].Inputs = []string{counterIn}
	if s.sc.Poison > 0 {
		dead := connector.SinkParams{SinkID: "dead", Path: "chaos.sinks.dead", Store: st,
			Parameters: map[string]any{"queue_path": deadQueue}}
		cp := pl.Computations[counterComp]
		cp.Code = poisoning(cp.Code)
		cp.Outputs = append(cp.Outputs, "dead")
		cp.DeadLetterStream = "dead"
		cp.Sinks = append(cp.Sinks, plan.SinkPlan{ID: "dead", InputStream: "dead", New: func() (connector.Sink, error) { return queue.NewSyncSink(dead) }})
	}
	if c.Uint32Bucket {
		pl.Computations[readerComp].Code = testconn.Uint32Bucketer(readerKind)
		for _, name := range []string{counterComp, relayComp} {
			if cp := pl.Computations[name]; cp != nil {
				cp.GroupBy = []string{"bucket", "key"}
			}
		}
	}
	return pl, nil
}

// counterCode is Counter's code: builtin.Counter, or with ExternalState
// builtin.ExternalCounter (counts in the external state table key_counts).
func counterCode(c Config) weir.Computation {
	if c.ExternalState {
		return builtin.ExternalCounter()
	}
	return builtin.Counter()
}

// counterTables declares key_counts for ExternalCounter.
func counterTables(c Config) map[string]plan.ExternalAccess {
	if !c.ExternalState {
		return nil
	}
	return map[string]plan.ExternalAccess{builtin.KeyCountsTable: {Table: builtin.KeyCountsDecl(), Write: true}}
}

// broken reports whether the life's store refuses work after a write
// error. The engine then stops (engine.Run returns store.ErrUnusable, see
// TestBrokenStoreStopsEngine) and relies on a supervisor to restart the
// process; the simulation plays that supervisor.
func (s *sim) broken(ctx context.Context) bool {
	_, _, err := s.life.raw.Get(ctx, store.FlowState, []byte("chaos_health"))
	return errors.Is(err, pstore.ErrBroken)
}

func (s *sim) run(ctx context.Context) *Result {
	res := &Result{Scenario: s.sc}
	deadline := time.Now().Add(s.opts.Timeout)
	if err := s.startLife(ctx); err != nil {
		s.violate("C7", "start: %v", err)
		return s.finish(ctx, res)
	}
	eps := s.sc.Episodes
	var ep *episode
	for {
		l := s.life
		// A process restarted after its pipeline completed finds the
		// completed run and loads it as stopped (controller.Load): the run
		// completed, in the previous life. Waiting for Completed here was a
		// liveness failure of the harness (seed 102's store-error episode,
		// when the WAL failed just after the completion was persisted).
		if l.ctl.State() == controller.Completed || l.ctl.PreviousRunCompleted() {
			break
		}
		if time.Now().After(deadline) {
			s.violate("C7", "liveness: not completed after %v (progress %d of %d inputs); controller state %s, stats %+v, partitions %+v",
				s.opts.Timeout, s.progress.Load(), s.sc.Messages, l.ctl.State(), l.ctl.Stats(), l.ctl.Partitions())
			break
		}
		if err := ctx.Err(); err != nil {
			s.violate("C7", "interrupted: %v", err)
			break
		}
		for _, w := range l.workers {
			w.Heartbeat()
		}
		if err := s.cycle(ctx, l); err != nil {
			s.logf("controller cycle: %v", err)
		}
		if l.panicked.Load() {
			if err := s.crashRestart(ctx, l); err != nil {
				s.violate("C7", "%v", err)
				return s.finish(ctx, res)
			}
			ep = nil
			continue
		}
		s.clk.Advance(s.sc.ClockStep)
		s.release()
		if err := s.watchReveal(l); err != nil {
			s.violate("C7", "%v", err)
			return s.finish(ctx, res)
		}
		if ep == nil && len(eps) > 0 && float64(s.progress.Load()) >= eps[0].At*float64(s.sc.Messages) {
			ep = &episode{Episode: eps[0]}
			eps = eps[1:]
		}
		if ep != nil {
			done, err := s.step(ctx, ep)
			if err != nil {
				s.violate("C7", "%s: %v", ep.Kind, err)
				return s.finish(ctx, res)
			}
			if done {
				ep = nil
			}
		}
		// Broken first, then injected: a WAL fault counts itself before its
		// error reaches Pebble, so a store seen broken with nothing counted
		// after that is a real failure. In the other order, an episode's
		// fault landing between the two reads looked like one (seed 101 of
		// TestMetamorphic in CI, an episode armed in this very cycle).
		if s.broken(ctx) && s.life.fault.injected.Load() == 0 {
			// Broken without an injected fault: a real failure of the store.
			_, _, cause := s.life.raw.Get(ctx, store.FlowState, []byte("chaos_health"))
			s.violate("C7", "the store broke without an injected fault: %v", cause)
			if err := s.restart(ctx, "store broken", time.Now(), nil); err != nil {
				s.violate("C7", "%v", err)
				return s.finish(ctx, res)
			}
		}
		time.Sleep(time.Millisecond)
	}
	for _, e := range eps {
		switch e.Kind {
		case EpZombie:
			s.stats.add(func(st *Stats) { st.ZombiesNotFired++ })
		case EpStoreError:
			s.stats.add(func(st *Stats) { st.StoreErrNotFired++ })
		}
	}
	if ep != nil {
		if ep.Kind == EpZombie && ep.phase == 3 {
			// The pipeline completed while the zombie slept: it still wakes
			// up and tries its commit.
			s.resumeZombie(ep)
			time.Sleep(50 * time.Millisecond)
		}
		s.life.hooks.unfreeze()
	}
	return s.finish(ctx, res)
}

// release lets the source show more input, like a producer writing while
// the pipeline runs. While a partition is hidden (FaultSet.NewPartition),
// the release stops at revealCap, so the visible partitions cannot finish
// (and the pipeline complete) before the hidden one appears; at the cap it
// is revealed.
func (s *sim) release() {
	step := int64(max(1, s.sc.Messages/max(1, s.sc.PaceCycles)))
	h := s.hidden.Load()
	if h == nil {
		s.released.Add(step)
		return
	}
	if s.released.Load() < s.revealCap {
		s.released.Store(min(s.released.Load()+step, s.revealCap))
		return
	}
	s.hidden.Store(nil)
	s.revealing, s.revealDeadline = true, time.Now().Add(20*time.Second)
	s.logf("new partition: source partition %s appears", *h)
}

// watchReveal moves the clock past the controller's re-list period while a
// revealed partition waits for its job, and fails if none starts in time.
func (s *sim) watchReveal(l *life) error {
	if !s.revealing {
		return nil
	}
	part := plan.SourcePartitionID(readerComp, fmt.Sprintf("p%d", s.sc.SourcePartitions-1))
	for _, p := range l.ctl.Partitions() {
		if p.Partition == part && p.Job != "" {
			s.revealing = false
			s.stats.add(func(st *Stats) { st.NewPartitions++ })
			return nil
		}
	}
	if time.Now().After(s.revealDeadline) {
		return fmt.Errorf("source partition %s appeared but got no job within 20s", part)
	}
	s.clk.Advance(50 * time.Millisecond)
	return nil
}

// resumeZombie lets the frozen job of ep go on, after its partition was
// re-leased.
func (s *sim) resumeZombie(ep *episode) {
	s.logf("zombie: resuming the zombie of %s", ep.target)
	// A Transform job commits every epoch with input; a Swift job commits
	// only when it has something to persist, so its zombie may never try.
	transform := strings.HasPrefix(string(ep.target), counterComp+"/") ||
		(strings.HasPrefix(string(ep.target), readerComp+"@") && !s.sc.SwiftReader)
	if ep.Point == job.CrashBeforeCommit && transform {
		s.fencedZombies++
		s.fencePending, s.attemptsAtResume = true, s.stats.snapshot().ZombieAttempts
	}
	s.life.hooks.unfreeze()
}

// cycle runs one controller cycle. If Pebble panicked meanwhile, the
// cycle may block forever on Pebble's commit pipeline: it is abandoned
// with the dead process.
func (s *sim) cycle(ctx context.Context, l *life) error {
	done := make(chan error, 1)
	go func() { done <- l.ctl.Cycle(ctx) }()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if l.panicked.Load() {
				return errors.New("abandoned: the process crashed")
			}
		}
	}
}

// crashRestart restarts after Pebble panicked: a process crash, so every
// byte written survives (the OS page cache outlives the process), on a
// copy of the filesystem without the dead process's file lock.
func (s *sim) crashRestart(ctx context.Context, l *life) error {
	s.stats.add(func(st *Stats) { st.PebblePanics++ })
	l.crashing.Store(true)
	return s.restart(ctx, fmt.Sprintf("Pebble panicked (%v)", l.panicWhat.Load()), time.Unix(0, l.panicAt.Load()), nil)
}

// episode is a discrete fault in progress.
type episode struct {
	Episode
	phase    int
	deadline time.Time
	frozen   <-chan struct{}
	target   transport.PartitionID
	lease    store.LeaseID
	worker   *worker.Worker
}

// zombieLag bounds how long (wall clock) a zombie stays frozen after its
// partition was re-leased (the seed picks a lag below it).
const zombieLag = 20 * time.Millisecond

// bigStep is how far the clock moves per cycle while an episode waits for
// the controller to notice a silent job or worker, or an expired lease.
const bigStep = 200 * time.Millisecond

// step advances ep by one cycle; it reports whether ep is over.
func (s *sim) step(ctx context.Context, ep *episode) (bool, error) {
	l := s.life
	now := time.Now()
	switch ep.Kind {
	case EpZombie:
		switch ep.phase {
		case 0:
			var parts []transport.PartitionID
			for _, p := range l.ctl.Partitions() {
				if p.Job != "" {
					parts = append(parts, p.Partition)
				}
			}
			if len(parts) == 0 {
				return false, nil // nothing running yet: try next cycle
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
			ep.target = parts[ep.Pick%uint64(len(parts))]
			if ep.Target != "" {
				ep.target = ep.Target
			}
			ep.frozen = l.hooks.arm(ep.target, ep.Point)
			ep.deadline, ep.phase = now.Add(3*time.Second), 1
		case 1:
			select {
			case <-ep.frozen:
			default:
				if now.After(ep.deadline) {
					l.hooks.unfreeze()
					s.stats.add(func(st *Stats) { st.ZombiesNotFired++ })
					return true, nil
				}
				return false, nil
			}
			ep.lease = l.ctl.Lease(ep.target)
			if ep.lease == 0 {
				l.hooks.unfreeze()
				s.stats.add(func(st *Stats) { st.ZombiesNotFired++ })
				return true, nil
			}
			if s.sc.Faults.ExpireLease {
				l.st.DropPings(ep.lease)
			}
			s.logf("zombie: %s frozen at %s with %s", ep.target, ep.Point, ep.lease)
			ep.deadline, ep.phase = now.Add(30*time.Second), 2
		case 2:
			s.clk.Advance(bigStep)
			if cur := l.ctl.Lease(ep.target); l.st.Ended(ep.lease) && cur != 0 && cur != ep.lease {
				expired := false
				if st, err := l.st.LeaseState(ctx, ep.lease); err == nil && st == store.LeaseExpired {
					expired = true
				}
				s.logf("zombie: %s re-leased (%s → %s, old lease expired %v)", ep.target, ep.lease, cur, expired)
				s.stats.add(func(st *Stats) {
					st.ZombieEpisodes++
					if expired {
						st.ZombiesExpired++
					}
				})
				// Let the replacement start and work a little: a zombie wakes
				// up late.
				ep.deadline, ep.phase = now.Add(time.Duration(ep.Pick>>32%uint64(zombieLag/time.Microsecond))*time.Microsecond), 3
				return false, nil
			}
			if now.After(ep.deadline) {
				l.hooks.unfreeze()
				return true, fmt.Errorf("the frozen job's partition %s was not re-leased within 30s", ep.target)
			}
		case 3:
			if now.After(ep.deadline) {
				s.resumeZombie(ep)
				return true, nil
			}
		}
	case EpWorkerLoss:
		switch ep.phase {
		case 0:
			load := map[string]int{}
			for _, p := range l.ctl.Partitions() {
				if p.Job != "" {
					load[p.Worker]++
				}
			}
			var cands []*worker.Worker
			for _, w := range l.workers {
				if load[w.ID()] > 0 {
					cands = append(cands, w)
				}
			}
			if len(cands) == 0 {
				return false, nil
			}
			ep.worker = cands[ep.Pick%uint64(len(cands))]
			ep.worker.Freeze()
			s.logf("worker loss: %s stops heartbeating", ep.worker.ID())
			s.stats.add(func(st *Stats) { st.WorkerLosses++ })
			ep.deadline, ep.phase = now.Add(30*time.Second), 1
		case 1:
			s.clk.Advance(bigStep)
			for _, p := range l.ctl.Partitions() {
				if p.Worker == ep.worker.ID() {
					if now.After(ep.deadline) {
						ep.worker.Restart()
						return true, fmt.Errorf("the jobs of lost worker %s were not moved within 30s", ep.worker.ID())
					}
					return false, nil
				}
			}
			ep.worker.Restart()
			return true, nil
		}
	case EpStoreError:
		switch ep.phase {
		case 0:
			l.fault.sync.Store(ep.Sync)
			l.fault.skip.Store(int64(ep.Skip))
			l.fault.armed.Store(true)
			ep.deadline, ep.phase = now.Add(5*time.Second), 1
		case 1:
			if l.fault.injected.Load() == 0 {
				if !now.After(ep.deadline) {
					return false, nil
				}
				if !l.fault.disarm() {
					s.stats.add(func(st *Stats) { st.StoreErrNotFired++ })
					return true, nil
				}
				// It fired while being disarmed: see it through, giving
				// the failing commit its time to return.
				ep.deadline = now.Add(5 * time.Second)
				return false, nil
			}
			if l.panicked.Load() {
				s.stats.add(func(st *Stats) { st.StoreErrors++ })
				return true, nil // the driver restarts the crashed process
			}
			if !s.broken(ctx) && now.Before(ep.deadline) {
				return false, nil // the failing commit has not returned yet
			}
			t0 := time.Unix(0, l.fault.firstAt.Load())
			s.stats.add(func(st *Stats) { st.StoreErrors++ })
			return true, s.restart(ctx, fmt.Sprintf("WAL %s error (%s)", map[bool]string{false: "write", true: "sync"}[ep.Sync], ep.Episode), t0, nil)
		}
	case EpPowerLoss:
		l.crashing.Store(true)
		cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: ep.Unsynced}
		if ep.Unsynced > 0 {
			cfg.RNG = rand.New(rand.NewPCG(s.sc.Seed, ep.Pick))
		}
		crashed := s.base.CrashClone(cfg)
		t0 := time.Now()
		s.stats.add(func(st *Stats) { st.PowerLosses++ })
		return true, s.restart(ctx, "power loss ("+ep.Episode.String()+")", t0, crashed)
	case EpNewPartition:
		return true, nil // release reveals the partition (see sim.release)
	case EpPauseStop:
		return s.pauseStop(ctx, l, ep, now)
	case EpHandover:
		return true, s.handover(ctx, l)
	case EpRescale:
		return s.rescale(ctx, l, ep, now)
	}
	return false, nil
}

// completedIsDone is nil for SetTarget's refusal of a run that completed
// after the episode looked at its state (seed 143): the pipeline finished
// first, which ends the episode as a completed state seen by reach does.
func completedIsDone(err error) error {
	if errors.Is(err, controller.ErrCompleted) {
		return nil
	}
	return err
}

// pauseStop drives EpPauseStop: pause (jobs stopped at once), then stop
// (the pipeline runs again in draining mode until nothing is in flight),
// check that "stopped" means drained — no partition's outbox holds an
// output — then start again. A process restart in between finds the
// persisted state and target and carries on.
func (s *sim) pauseStop(ctx context.Context, l *life, ep *episode, now time.Time) (bool, error) {
	reach := func(want controller.State, next controller.State, phase int) (bool, error) {
		if st := l.ctl.State(); st != want {
			if st == controller.Completed {
				return true, nil
			}
			if now.After(ep.deadline) {
				return true, fmt.Errorf("pause-stop: state %s, waited 30s for %s", st, want)
			}
			return false, nil
		}
		if want == controller.Stopped {
			n, err := countRows(ctx, l.st, store.OutputMessages)
			if err != nil {
				return true, err
			}
			if n != 0 {
				s.violate("C7", "pipeline reported stopped with %d outputs still in outboxes: stopped must mean drained", n)
			}
		}
		if err := l.ctl.SetTarget(next); err != nil {
			return true, completedIsDone(err)
		}
		s.logf("pause-stop: %s reached; target %s", want, next)
		ep.phase, ep.deadline = phase, now.Add(30*time.Second)
		return false, nil
	}
	switch ep.phase {
	case 0:
		if err := l.ctl.SetTarget(controller.Paused); err != nil {
			return true, completedIsDone(err)
		}
		s.logf("pause-stop: target paused")
		ep.phase, ep.deadline = 1, now.Add(30*time.Second)
	case 1:
		return reach(controller.Paused, controller.Stopped, 2)
	case 2:
		return reach(controller.Stopped, controller.Working, 3)
	case 3:
		if l.ctl.State() == controller.Working {
			s.stats.add(func(st *Stats) { st.PauseStops++ })
			return true, nil
		}
		if now.After(ep.deadline) {
			return true, fmt.Errorf("pause-stop: state %s, waited 30s for working", l.ctl.State())
		}
	}
	return false, nil
}

func countRows(ctx context.Context, st store.Store, t store.Table) (int, error) {
	n := 0
	err := st.Scan(ctx, store.Range{Table: t}, func(_, _ []byte) bool { n++; return true })
	return n, err
}

// restCheck runs the at-rest checks on a freshly reopened store, before
// any job runs: every output row seen committed is still there (C3), and
// the committed offsets are covered by committed state (C4: "on recovery
// the resume offset equals the state's recorded offset, with no gap").
func (s *sim) restCheck(ctx context.Context, st store.Store) {
	rows, err := readOutputs(ctx, st, s.sc.OutputPartitions, nil)
	if err != nil {
		s.violate("C3", "read the outputs after a restart: %v", err)
		return
	}
	_, exp := s.ledger.verify(s, rows, fmt.Sprintf("after restart %d", s.lives))
	s.stats.add(func(st *Stats) { st.Exposures += exp })
	offs, err1 := readOffsets(ctx, st, s.sc.Workload)
	states, err2 := readStates(ctx, st, s.sc.ExternalState)
	box := map[string]int{}
	var err3 error
	if !s.sc.SwiftReader {
		box, err3 = readOutbox(ctx, st, s.sc.Workload)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		s.violate("C4", "read the state after a restart: %v", err)
		return
	}
	need := (&needOf{in: s.in}).at(offs)
	for k, n := range need {
		if int(states[k])+box[k] < n {
			s.violate("C4", "after restart %d: offsets %v cover %d rows of key %s, state %d + outbox %d does not", s.lives, offs, n, k, states[k], box[k])
		}
	}
	if !s.sc.SwiftReader {
		for k, v := range states {
			if int(v) > need[k] {
				s.violate("C4", "after restart %d: state of key %s is %d, above the %d rows below the offsets %v", s.lives, k, v, need[k], offs)
			}
		}
	}
}

// finish stops the engine, simulates a power loss that keeps only synced
// data, reopens the store and runs the final checks on what is durable.
func (s *sim) finish(ctx context.Context, res *Result) *Result {
	if s.life != nil {
		s.life.crashing.Store(true)
		crashed := s.base.CrashClone(vfs.CrashCloneCfg{})
		s.stopLife()
		s.base = crashed
	}
	st, _, err := s.openStore()
	if err != nil {
		s.violate("C2", "open the final store: %v", err)
	} else {
		s.sabotageOutputs(ctx, st)
		s.finalCheck(ctx, st, res)
		st.Close()
	}
	res.Stats = s.stats.snapshot()
	s.mu.Lock()
	res.Violations = append([]string(nil), s.violations...)
	if s.nviol > len(s.violations) {
		res.Violations = append(res.Violations, fmt.Sprintf("… and %d more", s.nviol-len(s.violations)))
	}
	res.C3, res.C4 = s.c3, s.c4
	if len(res.Violations) > 0 {
		n := max(0, len(s.logs)-60)
		res.Logs = strings.Join(s.logs[n:], "\n")
	}
	s.mu.Unlock()
	return res
}

// finalCheck runs C1 (exactly-once per key in the output queue), C2 (the
// committed state equals the reference model, and the committed offsets
// cover the whole input) and C3 (every row seen during the run is there),
// on the final durable store.
func (s *sim) finalCheck(ctx context.Context, st store.Store, res *Result) {
	rows, err := readOutputs(ctx, st, s.sc.OutputPartitions, nil)
	if err != nil {
		s.violate("C1", "read the output queue: %v", err)
		return
	}
	res.Outputs = len(rows)
	_, exp := s.ledger.verify(s, rows, "at the end")
	s.stats.add(func(st *Stats) {
		st.Exposures += exp
		st.Observations = len(s.ledger.confirmed)
	})
	got := map[string][]int64{}
	for _, r := range rows {
		got[r.Key] = append(got[r.Key], r.Count)
	}
	res.OutputSets = got
	for k, cs := range got {
		sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
		n := int64(s.in.expected[k])
		seen := map[int64]int{}
		for _, c := range cs {
			seen[c]++
		}
		for c, m := range seen {
			switch {
			case c < 1 || c > n:
				res.Unexpected += m
				s.violate("C1", "key %s: unexpected count %d (×%d); the key has %d inputs", k, c, m, n)
			case m > 1:
				res.Duplicated += m - 1
				s.violate("C1", "key %s: count %d appears %d times", k, c, m)
			}
		}
	}
	for k, n := range s.in.expected {
		seen := map[int64]bool{}
		for _, c := range got[k] {
			seen[c] = true
		}
		missing := 0
		for c := int64(1); c <= int64(n); c++ {
			if !seen[c] {
				missing++
			}
		}
		if missing > 0 {
			res.Lost += missing
			s.violate("C1", "key %s: %d of its counts 1..%d are missing", k, missing, n)
		}
	}
	if s.sc.Poison > 0 {
		dead, err := readDeadLetters(ctx, st)
		if err != nil {
			s.violate("C1", "read the dead letters: %v", err)
		}
		for seq := range s.in.poisoned {
			switch n := dead[seq]; {
			case n == 0:
				res.Lost++
				s.violate("C1", "poisoned row seq %d: no dead letter", seq)
			case n > 1:
				res.Duplicated += n - 1
				s.violate("C1", "poisoned row seq %d: %d dead letters", seq, n)
			}
		}
		for seq, n := range dead {
			if !s.in.poisoned[seq] {
				res.Unexpected += n
				s.violate("C1", "row seq %d dead-lettered %d times but not poisoned", seq, n)
			}
		}
		s.stats.add(func(st *Stats) { st.DeadLetters += len(dead) })
	}
	states, err := readStates(ctx, st, s.sc.ExternalState)
	if err != nil {
		s.violate("C2", "read the states: %v", err)
		return
	}
	res.State = states
	offs, err := readOffsets(ctx, st, s.sc.Workload)
	if err != nil {
		s.violate("C2", "read the offsets: %v", err)
		return
	}
	for p, rows := range s.in.parts {
		if offs[p] != uint64(len(rows)) {
			s.violate("C2", "source partition %s: committed offset %d, want %d (all input)", p, offs[p], len(rows))
		}
	}
	need := (&needOf{in: s.in}).at(offs)
	keys := map[string]bool{}
	for k := range need {
		keys[k] = true
	}
	for k := range states {
		keys[k] = true
	}
	for k := range keys {
		if states[k] != int64(need[k]) {
			res.StateMismatches++
			s.violate("C2", "key %s: committed Counter state %d, reference model over the committed input %d", k, states[k], need[k])
		}
	}
	if st := s.stats.snapshot(); s.fencedZombies > 0 && st.ZombieAttempts == 0 {
		s.violate("C5", "%d zombies resumed right before their commit, but no zombie commit was attempted: the fence was not tested", s.fencedZombies)
	}
	if st := s.stats.snapshot(); st.ZombieAccepted > 0 {
		s.violate("C5", "%d of %d zombie commits were accepted", st.ZombieAccepted, st.ZombieAttempts)
	}
}

// sabotageOutputs applies the output sabotages (see Options).
func (s *sim) sabotageOutputs(ctx context.Context, st store.Store) {
	switch s.opts.sabotage {
	case sabotageDuplicateOutput:
		q, err := queue.Open(ctx, st, outputQueue)
		if err == nil {
			var rows []queue.Row
			if rows, err = q.Read(ctx, 0, 0, 1); err == nil && len(rows) == 1 {
				err = q.Write(ctx, []weir.Row{rows[0].Row}, []int{0})
			}
		}
		if err != nil {
			s.logf("sabotage: %v", err)
		}
	case sabotageLoseOutput:
		txn := store.NewTxn()
		key := append([]byte(outputQueue+"\x00"), 0, 0, 0, 0)
		key = append(key, make([]byte, 8)...)
		txn.Delete(store.QueueRows, key)
		if err := st.Commit(ctx, txn); err != nil {
			s.logf("sabotage: %v", err)
		}
	}
}

// rescale drives EpRescale: it asks for the Counter on another partition
// count (1, 2, 7 or 16, by the episode's pick) and waits until the layout
// record says so; the episode ends without it when the run completes or
// the life ends first (the next life's controller carries the target out).
func (s *sim) rescale(ctx context.Context, l *life, ep *episode, now time.Time) (bool, error) {
	n := []int{1, 2, 7, 16}[ep.Pick%4]
	switch ep.phase {
	case 0:
		if err := l.ctl.Rescale(ctx, counterComp, n); err != nil {
			if store.Classify(err) == store.ClassRetriable || errors.Is(err, store.ErrUnusable) {
				return false, nil // the store is failing (another fault): ask again
			}
			return true, err
		}
		s.logf("rescale: %s to %d partitions asked", counterComp, n)
		s.stats.add(func(st *Stats) { st.Rescales++ })
		ep.phase, ep.deadline = 1, now.Add(60*time.Second)
		return false, nil
	default:
		rec, ok, err := controller.LoadLayout(ctx, l.st)
		if err != nil {
			return false, nil
		}
		if _, pending := rec.Targets[counterComp]; ok && rec.Counts[counterComp] == n && !pending {
			s.stats.add(func(st *Stats) { st.Rescaled++ })
			return true, nil
		}
		if l.ctl.State() == controller.Completed || now.After(ep.deadline) {
			return true, nil
		}
		return false, nil
	}
}
