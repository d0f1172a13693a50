package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/runtime"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Config configures an embedded engine.
type Config struct {
	Spec       *spec.Pipeline
	Store      store.Store
	Classes    *weir.Registry
	Connectors *connector.Registry
	// Logf receives the engine's log lines (nil: discard).
	Logf  func(format string, args ...any)
	Hooks runtime.Hooks
	// BufferBytes bounds each partition's transport buffer (0: default).
	BufferBytes int
}

// Engine is a pipeline running in this process.
type Engine struct {
	cfg     Config
	plan    *runtime.Plan
	hub     *transport.Hub
	board   *runtime.Board
	ctl     *controller.Controller
	workers []*controller.Worker
	started time.Time
}

// New validates the spec and builds the engine; Run starts it.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Spec == nil || cfg.Store == nil || cfg.Classes == nil || cfg.Connectors == nil {
		return nil, errors.New("engine: config lacks spec, store, classes or connectors")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	plan, err := BuildPlan(ctx, cfg.Spec, cfg.Classes, cfg.Connectors, cfg.Store)
	if err != nil {
		return nil, err
	}
	d := cfg.Spec.Dynamic
	e := &Engine{cfg: cfg, plan: plan, hub: transport.NewHub(cfg.BufferBytes), board: runtime.NewBoard(), started: time.Now()}
	n := d.WorkerCount
	if n <= 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		e.workers = append(e.workers, controller.NewWorker(fmt.Sprintf("worker-%d", i), cfg.Store))
	}
	e.ctl, err = controller.New(controller.Config{
		Plan: plan, Store: cfg.Store, Hub: e.hub, Board: e.board, Workers: e.workers,
		LeaseTimeout: d.LeaseTimeout.Std(), LeasePingPeriod: d.LeasePingPeriod.Std(),
		LostWorkerTimeout: d.LostJobTimeout.Std(), SchedulerPeriod: d.SchedulerPeriod.Std(),
		Hooks: cfg.Hooks, Rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), Logf: cfg.Logf,
	})
	if err != nil {
		return nil, err
	}
	if err := e.ctl.Load(ctx); err != nil {
		return nil, err
	}
	// The spec's target state wins over the persisted one: running a spec
	// whose target is working (the default) resumes a pipeline that an
	// earlier run stopped or paused. A completed pipeline stays completed.
	switch d.TargetState {
	case spec.StateStopped:
		err = e.ctl.SetTarget(controller.Stopped)
	case spec.StatePaused:
		err = e.ctl.SetTarget(controller.Paused)
	default:
		if s := e.ctl.State(); s != controller.Completed {
			err = e.ctl.SetTarget(controller.Working)
		}
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Controller returns the engine's controller (to change the target state).
func (e *Engine) Controller() *controller.Controller { return e.ctl }

// Plan returns the runtime plan.
func (e *Engine) Plan() *runtime.Plan { return e.plan }

// Board returns the job status board.
func (e *Engine) Board() *runtime.Board { return e.board }

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

// Status is a JSON-friendly snapshot of a running engine.
type Status struct {
	State        controller.State             `json:"state"`
	Computations map[string]runtime.Counters  `json:"computations"`
	Partitions   []controller.PartitionStatus `json:"partitions"`
	Controller   controller.Stats             `json:"controller"`
	// SinkFailures lists sinks whose delivery stopped (retries exhausted):
	// their partition makes no progress through them until the job restarts.
	SinkFailures []SinkFailure `json:"sink_failures,omitempty"`
	Uptime       float64       `json:"uptime_seconds"`
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
	for p, s := range e.board.Statuses() {
		for sink, msg := range s.SinkFailures {
			st.SinkFailures = append(st.SinkFailures, SinkFailure{Partition: string(p), Sink: sink, Error: msg})
		}
	}
	sort.Slice(st.SinkFailures, func(i, j int) bool {
		a, b := st.SinkFailures[i], st.SinkFailures[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Sink < b.Sink
	})
	return st
}
