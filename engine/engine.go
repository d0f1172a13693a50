package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/worker"
)

// Config configures an embedded engine.
type Config struct {
	Spec       *spec.Pipeline
	Store      store.Store
	Classes    *weir.Registry
	Connectors *connector.Registry
	// Logf receives the engine's log lines (nil: discard).
	Logf func(format string, args ...any)
	// Warnf receives the lines an operator must see even without verbose
	// logging (nil: discard): a partition's first job failure, rate-limited
	// summaries of repeated ones, sources that cannot be listed, a new run
	// of a pipeline whose earlier run completed.
	Warnf func(format string, args ...any)
	Hooks job.Hooks
	// BufferBytes bounds each partition's transport buffer (0: default).
	BufferBytes int
	// Pool, if set, runs the jobs on remote workers (the distributed
	// mode: package cluster) instead of workers in this process; Balance
	// moves jobs so that no worker holds more than its share.
	Pool    controller.Pool
	Balance bool
	// JobIDPrefix: controller.Config.JobIDPrefix.
	JobIDPrefix string
}

// Engine is a pipeline running in this process.
type Engine struct {
	cfg     Config
	plan    *plan.Plan
	hub     *transport.Hub
	board   *board.Board
	ctl     *controller.Controller
	workers []*worker.Worker
	started time.Time
}

// New validates the spec and builds the engine; Run starts it. It refuses
// (with a *StaticChangeError naming the fields) a spec whose static part
// differs from the last run's while the pipeline is not stopped, and
// persists the static part otherwise.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Spec == nil || cfg.Store == nil || cfg.Classes == nil || cfg.Connectors == nil {
		return nil, errors.New("engine: config lacks spec, store, classes or connectors")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Warnf == nil {
		cfg.Warnf = func(string, ...any) {}
	}
	pl, err := BuildPlan(ctx, cfg.Spec, cfg.Classes, cfg.Connectors, cfg.Store)
	if err != nil {
		return nil, err
	}
	layout, err := checkStaticSpec(ctx, cfg.Store, cfg.Spec, pl)
	if err != nil {
		return nil, err
	}
	// The plan runs the stored layout; a partition_count the spec changed
	// is a target the controller rescales to while the pipeline runs.
	if pl, err = pl.WithLayout(layout.Counts); err != nil {
		return nil, err
	}
	if err := externalstate.Declare(ctx, cfg.Store, externalstate.Tables(cfg.Spec)); err != nil {
		return nil, err
	}
	d := cfg.Spec.Dynamic
	e := &Engine{cfg: cfg, plan: pl, hub: transport.NewHub(cfg.BufferBytes), board: board.NewBoard(), started: time.Now()}
	e.hub.SetRowLimit(transport.RowLimit(pl.MaxBatchRows()))
	n := d.WorkerCount
	if n <= 0 {
		n = 1
	}
	if cfg.Pool != nil {
		n = 0
	}
	env := worker.Env{Plan: pl, Store: cfg.Store, Hub: e.hub, Board: e.board, Hooks: cfg.Hooks, Logf: cfg.Logf,
		CloseWait: SinkCloseWait(cfg.Spec)}
	for i := 0; i < n; i++ {
		e.workers = append(e.workers, worker.New(fmt.Sprintf("worker-%d", i), cfg.Store, env))
	}
	e.ctl, err = controller.New(controller.Config{
		Plan: pl, Store: cfg.Store, Hub: e.hub, Board: e.board, Workers: worker.ForController(e.workers),
		Pool: cfg.Pool, Balance: cfg.Balance, JobIDPrefix: cfg.JobIDPrefix,
		LeaseTimeout: d.LeaseTimeout.Std(), LeasePingPeriod: d.LeasePingPeriod.Std(),
		LostWorkerTimeout: d.LostJobTimeout.Std(), SchedulerPeriod: d.SchedulerPeriod.Std(),
		RestartBackoff: d.JobRestartBackoff.Std(), RestartBackoffMax: d.JobRestartBackoffMax.Std(),
		Rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), Logf: cfg.Logf, Warnf: cfg.Warnf,
		Layout: &layout, QuiesceTimeout: d.RescaleQuiesceTimeout.Std(),
	})
	if err != nil {
		return nil, err
	}
	if err := e.ctl.Load(ctx); err != nil {
		return nil, err
	}
	// The spec's target state wins over the persisted one: running a spec
	// whose target is working (the default) resumes a pipeline that an
	// earlier run stopped or paused, and starts a new run of one whose
	// earlier run completed (controller.Load).
	switch d.TargetState {
	case spec.StateStopped:
		err = e.ctl.SetTarget(controller.Stopped)
	case spec.StatePaused:
		err = e.ctl.SetTarget(controller.Paused)
	default:
		err = e.ctl.SetTarget(controller.Working)
	}
	if err != nil {
		return nil, err
	}
	if e.ctl.PreviousRunCompleted() {
		cfg.Warnf("the pipeline's previous run completed; this is a new run: it processes what arrived since, from the committed source positions (dedup and watermarks carry over)")
	}
	return e, nil
}

// Controller returns the engine's controller (to change the target state).
func (e *Engine) Controller() *controller.Controller { return e.ctl }

// Plan returns the runtime plan.
func (e *Engine) Plan() *plan.Plan { return e.plan }

// Board returns the job status board.
func (e *Engine) Board() *board.Board { return e.board }

// Run runs the pipeline until it completes, is stopped (a drain requested
// with the controller's SetTarget(Stopped)) or ctx ends. Workers heartbeat
// while it runs; when it returns every job has stopped and the sources are
// closed. An Engine runs once.
func (e *Engine) Run(ctx context.Context) (controller.State, error) {
	hbCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	period := e.cfg.Spec.Dynamic.LostJobTimeout.Std() / 4
	if period <= 0 {
		period = 250 * time.Millisecond
	}
	for _, w := range e.workers {
		go w.RunHeartbeats(hbCtx, period)
	}
	state, err := e.ctl.Run(ctx)
	for _, w := range e.workers {
		w.Shutdown() // stop every job of this run and wait for it
	}
	var errs []error
	for _, name := range e.plan.Order() {
		if src := e.plan.Computations[name].Source; src != nil {
			errs = append(errs, src.Close())
		}
	}
	if cerr := errors.Join(errs...); cerr != nil && err == nil {
		err = fmt.Errorf("engine: close sources: %w", cerr)
	}
	return state, err
}

// SinkCloseWait is the longest suspend_destruction_duration of p's
// enabled at-most-once strategies: how long a stopping sink may wait for
// its queue (worker.Env.CloseWait).
func SinkCloseWait(p *spec.Pipeline) time.Duration {
	var d time.Duration
	for _, c := range p.Computations {
		for _, s := range c.Sinks {
			if a := s.AtMostOnceStrategy; a != nil && a.Enabled {
				d = max(d, a.SuspendDestructionDuration.Std())
			}
		}
	}
	return d
}

// Status is a JSON-friendly snapshot of a running engine.
type Status struct {
	State        controller.State             `json:"state"`
	Computations map[string]board.Counters    `json:"computations"`
	Partitions   []controller.PartitionStatus `json:"partitions"`
	Controller   controller.Stats             `json:"controller"`
	// Failing lists the partitions whose jobs keep failing (restarted with
	// backoff), with the last error.
	Failing []Failing `json:"failing,omitempty"`
	// SinkFailures lists sinks whose delivery stopped (retries exhausted):
	// the controller restarts their partition's job with backoff, and the
	// new job sends the undelivered outputs again.
	SinkFailures []SinkFailure `json:"sink_failures,omitempty"`
	// SourceErrors lists the source computations whose source could not
	// be listed (a broker that cannot be reached, a missing topic): the
	// listing is retried with backoff, and a computation whose source was
	// never listed cannot run or complete.
	SourceErrors []SourceError `json:"source_errors,omitempty"`
	Uptime       float64       `json:"uptime_seconds"`
}

// SourceError is a source computation whose listings fail.
type SourceError struct {
	Computation string `json:"computation"`
	// Listed: an earlier listing succeeded (its partitions keep running).
	Listed              bool   `json:"listed"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastError           string `json:"last_error"`
	// RetryAt is when the next listing starts, while never listed.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// Failing is a partition whose jobs failed since its last healthy run.
type Failing struct {
	Partition           string `json:"partition"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastError           string `json:"last_error"`
	// RestartAt is when the next job may start, while in backoff.
	RestartAt *time.Time `json:"restart_at,omitempty"`
}

// SinkFailure is a sink whose delivery stopped in one partition.
type SinkFailure struct {
	Partition string `json:"partition"`
	Sink      string `json:"sink"`
	Error     string `json:"error"`
}

// Status returns a snapshot of the pipeline's state and counters.
func (e *Engine) Status() Status {
	up := time.Since(e.started).Seconds()
	st := Status{
		State:        e.ctl.State(),
		Computations: e.board.Counters(),
		Partitions:   e.ctl.Partitions(),
		Controller:   e.ctl.Stats(),
		Uptime:       up,
	}
	for _, p := range st.Partitions {
		if p.ConsecutiveFailures > 0 {
			st.Failing = append(st.Failing, Failing{Partition: string(p.Partition), ConsecutiveFailures: p.ConsecutiveFailures,
				LastError: p.LastError, RestartAt: p.RestartAt})
		}
	}
	st.SinkFailures = e.sinkFailures(st.Partitions)
	st.SourceErrors = e.sourceErrors()
	return st
}

// sourceErrors lists the sources whose last listing failed.
func (e *Engine) sourceErrors() []SourceError {
	var out []SourceError
	for _, s := range e.ctl.Sources() {
		if s.ConsecutiveFailures > 0 {
			out = append(out, SourceError{Computation: s.Computation, Listed: s.Listed,
				ConsecutiveFailures: s.ConsecutiveFailures, LastError: s.LastError, RetryAt: s.RetryAt})
		}
	}
	return out
}

// sinkFailures merges the sink failures the controller recorded when it
// removed a job with those current jobs report (the controller removes
// such a job in its next cycle), sorted.
func (e *Engine) sinkFailures(parts []controller.PartitionStatus) []SinkFailure {
	seen := map[[2]string]string{}
	for _, p := range parts {
		for sink, msg := range p.SinkFailures {
			seen[[2]string{string(p.Partition), sink}] = msg
		}
	}
	for p, s := range e.board.Statuses() {
		for sink, msg := range s.SinkFailures {
			seen[[2]string{string(p), sink}] = msg
		}
	}
	out := make([]SinkFailure, 0, len(seen))
	for k, msg := range seen {
		out = append(out, SinkFailure{Partition: k[0], Sink: k[1], Error: msg})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Sink < b.Sink
	})
	return out
}
