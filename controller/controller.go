// Package controller schedules a pipeline's jobs: it keeps the layout of
// partitions and jobs, owns one lease per job, replaces failed and lost
// jobs (failed ones with exponential backoff), computes stream watermarks,
// garbage-collects dedup rows, and drives the pipeline state machine
// (working, draining → stopped, pausing → paused, completed; see
// advanceState).
//
// The central invariant is the one Flow's LeaseManager keeps: at most one
// live lease per partition at any instant. A job is removed by aborting its
// lease, and AbortLease returns only after every commit that saw the lease
// alive has finished; only then is a replacement created with a new lease.
// A removed job may keep running (a zombie: a frozen goroutine, a lost
// worker), but none of its commits can succeed, and the status board drops
// its reports.
//
// A cycle observes, decides, then applies (cycle.go): it reads what it
// needs from the store (lease states, a timestamp) without holding the
// controller's mutex; decides under the mutex, touching only memory (the
// layout, the board); and carries out its decisions — lease aborts, state
// and watermark writes, dedup GC, lease creation and job starts, pings —
// after releasing it. Tests call Cycle directly with a manual clock; Run
// drives it every scheduler period. Nothing slow runs under the mutex: the
// sources' partition listings (a Kafka metadata call can take 30 s) run on
// a background goroutine whose result a later cycle consumes, so that lease
// pings are never delayed by them.
package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// State is a pipeline state.
type State string

// Pipeline states (Flow's names).
const (
	Working   State = "working"
	Draining  State = "draining"
	Stopped   State = "stopped"
	Pausing   State = "pausing"
	Paused    State = "paused"
	Completed State = "completed"
)

// Config configures a controller. Durations default to one-machine values.
type Config struct {
	Plan  *plan.Plan
	Store store.Store
	// Hub is the embedded engine's transport (optional: the controller
	// itself never sends).
	Hub   *transport.Hub
	Board *board.Board
	// Workers run the jobs; the controller places each job on the live
	// worker with the fewest jobs.
	Workers []Worker
	// Pool, if set, replaces Workers with a set that changes while the
	// controller runs (remote workers registering and leaving).
	Pool Pool
	// Balance moves jobs gracefully so that no live worker holds more than
	// ⌈jobs/workers⌉ (balance.go). The embedded engine's workers share one
	// process and do not need it.
	Balance bool
	// JobIDPrefix goes in front of the number of every job id this
	// controller issues ("Counter/0#" + prefix + n). Job ids must be unique
	// across every controller that may talk to the same workers: workers
	// report exits by job id, and a new leader whose first job ids repeated
	// its predecessor's (both count from 1) was told its fresh jobs had
	// exited, with the old jobs' "lease … is aborted", and restarted them
	// with backoff. The distributed mode sets "t<term>."; the embedded
	// engine's workers live and die with their controller and need none.
	JobIDPrefix string

	// LeaseTimeout: a lease not pinged for this long expires (default 5s).
	LeaseTimeout time.Duration
	// LeasePingPeriod: how often the controller pings live leases (default 1s).
	LeasePingPeriod time.Duration
	// LostWorkerTimeout: a worker silent for this long is lost, and so is a
	// job that posts no status for this long (default 3s). A removed job
	// that has not exited after this long no longer holds up pausing → paused
	// (its lease is aborted; it is a zombie that cannot commit).
	LostWorkerTimeout time.Duration
	// SchedulerPeriod: the cycle period of Run (default 100ms).
	SchedulerPeriod time.Duration
	// SyncListings lists the sources inside the cycle (before it takes the
	// mutex) instead of on a background goroutine: deterministic
	// simulations use it so that a seed replays the same layout changes.
	SyncListings bool
	// SourceRelistPeriod: how often sources are asked for their partition
	// list, so that new source partitions get jobs (default 10s). Only the
	// first listing runs inside a cycle; later ones run in the background.
	SourceRelistPeriod time.Duration
	// RestartBackoff is the delay before restarting a partition whose job
	// failed (exited with an error, stopped on a sink whose retries ran out,
	// or posted no status for LostWorkerTimeout). It doubles with every
	// consecutive failure of the partition up to RestartBackoffMax; a job
	// that runs RestartBackoffMax without failing resets the count. Jobs
	// removed through no fault of their own (a lost worker, an expired lease)
	// restart at once. Default 1s; negative: no backoff (restart in the same
	// cycle — for simulations whose clock does not move).
	RestartBackoff time.Duration
	// RestartBackoffMax caps the backoff (default 30s).
	RestartBackoffMax time.Duration

	// Layout is the record of the pipeline's layout the engine loaded
	// (LoadLayout): Plan already has its counts; its targets are rescales
	// to carry out (rescale.go). Nil: a pipeline never rescaled whose plan
	// has the spec's counts.
	Layout *LayoutRecord

	Rand *rand.Rand
	Logf func(format string, args ...any)
	// Warnf receives what an operator must see without verbose logging: a
	// partition's first job failure, at most one summary of further
	// failures per FailureLogPeriod, a partition running healthy again,
	// and sources whose partitions cannot be listed (nil: discard).
	Warnf func(format string, args ...any)
	// FailureLogPeriod bounds how often Warnf gets a summary of repeated
	// failures (default 10s).
	FailureLogPeriod time.Duration
	// QuiesceTimeout bounds how long a rescale keeps a computation
	// quiesced (taking no input) waiting for its outputs to be delivered:
	// past it the computation takes input again and the rescale is tried
	// again after a backoff that doubles from QuiesceTimeout up to 5
	// minutes (rescale.go). Default 10s.
	QuiesceTimeout time.Duration
}

// Worker is where the controller runs jobs (worker.Worker in the embedded
// engine; a simulation's worker in deterministic tests). Each life of a
// worker has its own incarnation: jobs started in an earlier incarnation
// are never trusted again.
type Worker interface {
	ID() string
	Incarnation() int
	// AliveAt reports whether the worker heartbeated within timeout before now.
	AliveAt(now time.Time, timeout time.Duration) bool
	// Load is the number of jobs running on the worker.
	Load() int
	// Start runs the job spec describes; its lease exists already.
	Start(spec plan.JobSpec) (Handle, error)
}

// Pool is a changing set of workers. Workers is called under the
// controller's mutex: it must return at once, from memory.
type Pool interface {
	Workers() []Worker
}

// Drainer is a Worker that may be draining (being emptied before
// maintenance): it gets no new job and its jobs move elsewhere.
type Drainer interface {
	Draining() bool
}

// Finisher is a Handle that can stop its job gracefully, after the epoch
// in flight (job.Config.Finish); a move uses it.
type Finisher interface {
	Finish()
}

// Handle is a started job, as the controller sees it.
type Handle interface {
	// Stop asks the job to stop; it does not wait.
	Stop()
	// Done reports whether the job has exited, and its error.
	Done() (bool, error)
}

func (c *Config) defaults() {
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = 5 * time.Second
	}
	if c.LeasePingPeriod <= 0 {
		c.LeasePingPeriod = time.Second
	}
	if c.LostWorkerTimeout <= 0 {
		c.LostWorkerTimeout = 3 * time.Second
	}
	if c.SchedulerPeriod <= 0 {
		c.SchedulerPeriod = 100 * time.Millisecond
	}
	if c.SourceRelistPeriod <= 0 {
		c.SourceRelistPeriod = 10 * time.Second
	}
	if c.RestartBackoff == 0 {
		c.RestartBackoff = time.Second
	}
	if c.RestartBackoffMax <= 0 {
		c.RestartBackoffMax = 30 * time.Second
	}
	if c.RestartBackoff > c.RestartBackoffMax {
		c.RestartBackoffMax = c.RestartBackoff
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Warnf == nil {
		c.Warnf = func(string, ...any) {}
	}
	if c.FailureLogPeriod <= 0 {
		c.FailureLogPeriod = 10 * time.Second
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = 10 * time.Second
	}
}

// partition is one entry of the layout.
type partition struct {
	comp *plan.CompPlan
	spec plan.PartitionSpec
	job  *jobEntry
	// restarts counts replacements, for status and tests.
	restarts  int
	lastErr   error
	lastErrAt time.Time
	// failures counts consecutive failures of the partition's jobs; no job
	// starts before restartAt (store clock). See Config.RestartBackoff.
	failures  int
	restartAt time.Time
	// sinkFailures holds the sink errors that made the last job fail, until
	// a job runs healthy again.
	sinkFailures map[string]string
	// lastLease is the last lease created for the partition (for the
	// one-live-lease invariant check).
	lastLease store.LeaseID
}

// jobEntry is a job in the layout.
type jobEntry struct {
	id     plan.JobID
	lease  store.LeaseID
	worker Worker
	// incarnation of the worker when the job started; a job outlives its
	// worker's incarnation only as a zombie.
	incarnation int
	handle      Handle
	pingedAt    time.Time
	startedAt   time.Time
	// finishing: a move asked the job to stop after its epoch in flight
	// (balance.go); its exit is not a failure.
	finishing   bool
	finishingAt time.Time
}

// exitingJob is a removed job whose goroutine may still run.
type exitingJob struct {
	handle    Handle
	removedAt time.Time
}

// Controller is the scheduler of one pipeline.
type Controller struct {
	cfg Config
	// plan is the plan of the current layout: cfg.Plan until a rescale
	// commits another (rescale.go). Guarded by mu once Run has started.
	plan *plan.Plan

	mu             sync.Mutex
	state          State
	target         State
	statePersisted bool
	partitions     map[transport.PartitionID]*partition
	order          []transport.PartitionID
	laidOut        bool
	seq            int
	complete       map[string]bool        // computation → completed
	sources        map[string]*sourceList // source computation → its listing
	exiting        []exitingJob
	drain          drainCheck
	marks          marks
	listing        lister
	flog           failureLog
	stats          Stats
	// previousRunCompleted: Load found the state of a completed run.
	previousRunCompleted bool
	// halting: Halt was called; Run returns once the pipeline is paused.
	halting bool
	// adoptees: jobs of an earlier controller offered by Adopt, until the
	// first layout settles them (adopt.go).
	adoptees []Adoptee
	// frontierGCAt is when frontier rows of earlier layouts were last
	// looked at (frontiergc.go).
	frontierGCAt time.Time
	// layout is the persisted layout record; rescale the one under way
	// (rescale.go).
	layout  LayoutRecord
	rescale *rescaling
	// rescaleRetryAt: no rescale begins before it (a quiesce timed out);
	// quiesceTimeouts counts them in a row, for the backoff.
	rescaleRetryAt  time.Time
	quiesceTimeouts int
	// layoutMu serializes the commits of the layout record (Rescale and a
	// rescale's switch), each a read-modify-write of one row.
	layoutMu sync.Mutex
	// rescales is the history of finished rescales, oldest first.
	rescales []RescaleReport
	// pendingResume: switched rescales whose new jobs have not all
	// reported yet.
	pendingResume []RescaleReport
}

// Stats counts controller events.
type Stats struct {
	Cycles      int
	JobsStarted int
	// JobsAdopted counts the jobs of an earlier controller taken over
	// (adopt.go).
	JobsAdopted   int
	JobsFailed    int
	JobsLost      int
	LeasesExpired int
	LeasesAborted int
	// Moves counts jobs moved by balancing (balance.go).
	Moves int
	// SourceListings counts completed background listings of the sources.
	SourceListings int
	LastCycleError string
}

// New builds a controller. Call Start (or set a target) and then Cycle/Run.
func New(cfg Config) (*Controller, error) {
	cfg.defaults()
	if cfg.Plan == nil || cfg.Store == nil || cfg.Board == nil {
		return nil, errors.New("controller: config lacks plan, store or board")
	}
	if len(cfg.Workers) == 0 && cfg.Pool == nil {
		return nil, errors.New("controller: no workers")
	}
	if err := cfg.Plan.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg: cfg, plan: cfg.Plan, state: Working, target: Working,
		partitions: map[transport.PartitionID]*partition{},
		complete:   map[string]bool{},
		sources:    map[string]*sourceList{},
		marks:      newMarks(),
		flog:       newFailureLog(cfg.FailureLogPeriod, cfg.Warnf),
	}
	c.listing.init()
	if cfg.Layout != nil {
		c.layout = cfg.Layout.clone()
	}
	return c, nil
}

// Load restores the persisted pipeline state (a stopped or paused one stays
// so until a new target), the published watermarks and the dedup floors.
//
// A pipeline whose earlier run completed is loaded as stopped: completed is
// final for that run (this controller never leaves Completed once it
// reached it), and a completed run is drained — nothing in flight, no
// timer left. A new target starts a new run from the committed source
// positions, dedup floors and published watermarks, so that input that
// arrived since is processed exactly once and nothing is processed twice
// (a completed computation's watermark is a store timestamp, below
// anything the new run emits). PreviousRunCompleted reports it.
func (c *Controller) Load(ctx context.Context) error {
	s, ok, err := LoadState(ctx, c.cfg.Store)
	if err != nil {
		return err
	}
	m := newMarks()
	if err := m.load(ctx, c.cfg.Store, c.plan); err != nil {
		return err
	}
	m.raiseToPublished(c.cfg.Board, c.plan)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marks = m
	if ok {
		persisted := true
		switch s {
		case Pausing:
			s = Paused // no job of an earlier process runs any more
		case Draining:
			c.target = Stopped
		case Completed:
			s, persisted, c.previousRunCompleted = Stopped, false, true
		}
		c.state, c.statePersisted = s, persisted
		if s == Stopped || s == Paused {
			c.target = s
		}
	}
	return nil
}

const stateKey = "pipeline_state"

// LoadState reads the pipeline state persisted in st (ok false: none, a
// pipeline that never ran a cycle).
func LoadState(ctx context.Context, st store.Store) (State, bool, error) {
	v, ok, err := st.Get(ctx, store.FlowState, []byte(stateKey))
	if err != nil {
		return "", false, fmt.Errorf("controller: read pipeline state: %w", err)
	}
	return State(v), ok, nil
}

// PreviousRunCompleted reports whether Load found a pipeline whose earlier
// run completed (and loaded it as stopped: see Load).
func (c *Controller) PreviousRunCompleted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.previousRunCompleted
}

// State returns the pipeline state.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Stats returns a copy of the counters.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.SourceListings = c.listing.completed()
	return s
}

// ErrCompleted is SetTarget's error for a run that has completed.
var ErrCompleted = errors.New("controller: this run of the pipeline is completed (final); run it again ('weir run' with the same --data) to process input that arrived since")

// SetTarget asks for a pipeline state: Working (start), Stopped (drain then
// stop), Paused (stop now). A completed run cannot leave Completed (a new
// controller loading the pipeline starts a new run: see Load); SetTarget
// then fails with ErrCompleted.
func (c *Controller) SetTarget(t State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == Completed {
		return ErrCompleted
	}
	switch t {
	case Working, Stopped, Paused:
	default:
		return fmt.Errorf("controller: %q is not a target state (want working, stopped or paused)", t)
	}
	c.target = t
	return nil
}

// Halt stops the pipeline hard, as 'weir run' does when a drain does not
// finish within its drain timeout: like a pause, every job is removed at
// once and its lease aborted (no commit of it can succeed any more);
// in-flight data stays in the store, and the next run resumes it exactly
// once. Run returns once the pipeline is paused. A completed run is left
// as it is.
func (c *Controller) Halt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != Completed {
		c.target, c.halting = Paused, true
	}
}

// Run cycles until ctx ends or the pipeline reaches Completed or Stopped,
// or Paused after Halt; it then stops every job. A paused pipeline keeps
// cycling otherwise, waiting for a new target. When Run returns, no source
// listing is in flight (unless a source ignored the cancellation for more
// than 5 seconds).
func (c *Controller) Run(ctx context.Context) (State, error) {
	defer c.listing.stop(5 * time.Second)
	defer c.flushMarks(context.WithoutCancel(ctx))
	t := time.NewTicker(c.cfg.SchedulerPeriod)
	defer t.Stop()
	for {
		if err := c.Cycle(ctx); err != nil {
			if ctx.Err() != nil {
				return c.State(), ctx.Err()
			}
			if errors.Is(err, store.ErrUnusable) || errors.Is(err, store.ErrClosed) {
				// Nothing can progress on this store handle: stop every job
				// and report it, so that the process can exit and a restart
				// reopens the store (which recovers a consistent state).
				c.stopAll(ctx)
				return c.State(), fmt.Errorf("controller: the store can no longer be used; restart to recover: %w", err)
			}
			c.cfg.Logf("controller: cycle: %v", err)
		}
		c.mu.Lock()
		s, halted := c.state, c.state == Paused && c.halting
		c.mu.Unlock()
		if s == Completed || s == Stopped || halted {
			c.stopAll(ctx)
			return s, nil
		}
		select {
		case <-ctx.Done():
			return c.State(), ctx.Err()
		case <-t.C:
		case <-c.cfg.Board.Decided():
			// A partition turned drained (or quiet while draining): the
			// cycle that completes a computation or ends a drain need not
			// wait for the next period.
		}
	}
}
