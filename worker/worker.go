// Package worker runs jobs. In the embedded engine a worker is a group of
// goroutines in the controller's process: the controller tells it which
// partition to run under which lease (Start), and it heartbeats so that
// the controller can tell when it is lost.
package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Env is what every job of a worker shares: the pipeline's plan, store,
// transport and board, and the test hooks.
type Env struct {
	Plan  *plan.Plan
	Store store.Store
	Hub   *transport.Hub
	Board job.Board
	// Endpoint, if set, gives each job its own transport endpoint instead
	// of Hub (a worker process's network node: transport/remote).
	Endpoint func(plan.JobSpec) job.Transport
	// Hooks lets tests crash jobs at named points (nil in production).
	Hooks job.Hooks
	Logf  func(format string, args ...any)
	// CloseWait is how much longer than its own 5 s Shutdown waits for a
	// stopping job: the longest suspend_destruction_duration of the plan's
	// at-most-once sinks, whose Close waits that long for its queue and
	// then reports what it gives up — before the run's summary, not after
	// the process is gone.
	CloseWait time.Duration
}

// jobConfig builds a job's configuration from its spec and the environment.
func jobConfig(s plan.JobSpec, env Env, finish <-chan struct{}) job.Config {
	var tr job.Transport = env.Hub
	if env.Endpoint != nil {
		tr = env.Endpoint(s)
	}
	pl := env.Plan
	if s.Plan != nil {
		pl = s.Plan
	}
	return job.Config{
		Plan: pl, Comp: s.Comp, Partition: s.Partition, JobID: s.JobID, Lease: s.Lease,
		Store: env.Store, Hub: tr, Board: env.Board, Hooks: env.Hooks,
		Rand: rand.New(rand.NewPCG(s.Seed, uint64(s.Lease))), Logf: env.Logf, Finish: finish,
	}
}

// Worker runs jobs on goroutines. Each life of a worker has its own
// incarnation: jobs started in an earlier incarnation are never trusted
// again.
type Worker struct {
	id    string
	clock clock.Clock
	env   Env

	mu          sync.Mutex
	incarnation int
	lastBeat    time.Time
	frozen      bool
	jobs        map[*JobHandle]struct{}
}

// New returns a live worker whose heartbeats are read from clk (the
// store's clock) and whose jobs share env.
func New(id string, clk clock.Clock, env Env) *Worker {
	if env.Logf == nil {
		env.Logf = func(string, ...any) {}
	}
	return &Worker{id: id, clock: clk, env: env, lastBeat: clk.Now(), jobs: map[*JobHandle]struct{}{}}
}

// ID returns the worker's name.
func (w *Worker) ID() string { return w.id }

// Incarnation returns the worker's current incarnation.
func (w *Worker) Incarnation() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.incarnation
}

// Heartbeat records that the worker is alive now. A frozen worker's
// heartbeats are dropped.
func (w *Worker) Heartbeat() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.frozen {
		w.lastBeat = w.clock.Now()
	}
}

// Freeze makes the worker stop heartbeating (a network partition, a stalled
// process) without stopping its jobs: they become zombies once the
// controller declares the worker lost and aborts their leases.
func (w *Worker) Freeze() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
}

// Restart models a worker process restart: every job of the old incarnation
// is stopped, and the worker heartbeats again as a new incarnation.
func (w *Worker) Restart() {
	w.mu.Lock()
	jobs := w.jobs
	w.jobs = map[*JobHandle]struct{}{}
	w.incarnation++
	w.frozen = false
	w.lastBeat = w.clock.Now()
	w.mu.Unlock()
	for h := range jobs {
		h.Stop()
	}
}

// Shutdown stops every job of the worker and waits for them to exit (up to
// 5 seconds plus Env.CloseWait: a job stuck in a broken store is
// abandoned).
func (w *Worker) Shutdown() {
	w.mu.Lock()
	jobs := w.jobs
	w.jobs = map[*JobHandle]struct{}{}
	w.incarnation++
	w.mu.Unlock()
	deadline := time.After(5*time.Second + w.env.CloseWait)
	for h := range jobs {
		h.Stop()
	}
	for h := range jobs {
		select {
		case <-h.done:
		case <-deadline:
			return
		}
	}
}

// RunHeartbeats heartbeats every period until ctx ends.
func (w *Worker) RunHeartbeats(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		w.Heartbeat()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ForController lists ws as the controller's workers.
func ForController(ws []*Worker) []controller.Worker {
	out := make([]controller.Worker, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out
}

var _ controller.Worker = (*Worker)(nil)

// AliveAt reports whether the worker heartbeated within timeout before now.
func (w *Worker) AliveAt(now time.Time, timeout time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return now.Sub(w.lastBeat) < timeout
}

// Load is the number of jobs running on the worker.
func (w *Worker) Load() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

// Start runs a job on its own goroutine.
func (w *Worker) Start(spec plan.JobSpec) (controller.Handle, error) {
	return w.StartJob(spec)
}

// StartJob is Start returning the concrete handle.
func (w *Worker) StartJob(spec plan.JobSpec) (*JobHandle, error) {
	finish := make(chan struct{})
	j, err := job.New(jobConfig(spec, w.env, finish))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &JobHandle{cancel: cancel, done: make(chan struct{}), job: j, spec: spec, finishCh: finish}
	w.mu.Lock()
	w.jobs[h] = struct{}{}
	w.mu.Unlock()
	go func() {
		var err error
		// The computation's name labels the job's CPU samples, so that a
		// profile can be split by computation (go tool pprof -tagfocus).
		pprof.Do(ctx, pprof.Labels("computation", spec.Comp.Name), func(ctx context.Context) { err = j.Run(ctx) })
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil
		}
		h.finish(err)
		w.mu.Lock()
		delete(w.jobs, h)
		w.mu.Unlock()
	}()
	return h, nil
}

// JobHandle is a job running on a goroutine.
type JobHandle struct {
	cancel   context.CancelFunc
	job      *job.Job
	spec     plan.JobSpec
	finishCh chan struct{}
	once     sync.Once

	mu   sync.Mutex
	done chan struct{}
	err  error
	fin  bool
}

func (h *JobHandle) finish(err error) {
	h.mu.Lock()
	h.err, h.fin = err, true
	h.mu.Unlock()
	close(h.done)
}

// Stop asks the job to stop; it does not wait.
func (h *JobHandle) Stop() { h.cancel() }

// Finish asks the job to stop after the epoch in flight (a graceful move);
// it does not wait.
func (h *JobHandle) Finish() { h.once.Do(func() { close(h.finishCh) }) }

// Spec returns what the controller decided about the job.
func (h *JobHandle) Spec() plan.JobSpec { return h.spec }

// Jobs returns the handles of the worker's running jobs.
func (w *Worker) Jobs() []*JobHandle {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*JobHandle, 0, len(w.jobs))
	for h := range w.jobs {
		out = append(out, h)
	}
	return out
}

// Done reports whether the job has exited, and its error.
func (h *JobHandle) Done() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fin, h.err
}

// Wait blocks until the job has exited.
func (h *JobHandle) Wait() { <-h.done }
