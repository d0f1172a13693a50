// Package controller schedules a pipeline's jobs: it keeps the layout of
// partitions and jobs, owns one lease per job, replaces failed and lost
// jobs, computes stream watermarks, garbage-collects dedup rows, and drives
// the pipeline state machine (working, draining → stopped, pausing → paused,
// completed).
//
// The central invariant is the one Flow's LeaseManager keeps: at most one
// live lease per partition at any instant. A job is removed by aborting its
// lease, and AbortLease returns only after every commit that saw the lease
// alive has finished; only then is a replacement created with a new lease.
// A removed job may keep running (a zombie: a frozen goroutine, a lost
// worker), but none of its commits can succeed.
//
// Cycle is the deterministic step (tests call it directly with a manual
// clock); Run drives it every scheduler period.
package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/weir-stream/weir/runtime"
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
	Plan  *runtime.Plan
	Store store.Store
	Hub   *transport.Hub
	Board *runtime.Board
	// Workers run the jobs; the controller places each job on the live
	// worker with the fewest jobs.
	Workers []*Worker

	// LeaseTimeout: a lease not pinged for this long expires (default 5s).
	LeaseTimeout time.Duration
	// LeasePingPeriod: how often the controller pings live leases (default 1s).
	LeasePingPeriod time.Duration
	// LostWorkerTimeout: a worker silent for this long is lost, and so is a
	// job that posts no status for this long (default 3s).
	LostWorkerTimeout time.Duration
	// SchedulerPeriod: the cycle period of Run (default 100ms).
	SchedulerPeriod time.Duration
	// SourceRelistPeriod: how often sources are asked for their partition
	// list, so that new source partitions get jobs (default 10s).
	SourceRelistPeriod time.Duration

	Hooks runtime.Hooks
	Rand  *rand.Rand
	Logf  func(format string, args ...any)
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
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// partition is one entry of the layout.
type partition struct {
	comp *runtime.CompPlan
	spec runtime.PartitionSpec
	job  *jobEntry
	// restarts counts replacements, for status and tests.
	restarts int
	lastErr  error
}

// jobEntry is a job in the layout.
type jobEntry struct {
	id     runtime.JobID
	lease  store.LeaseID
	worker *Worker
	// incarnation of the worker when the job started; a job outlives its
	// worker's incarnation only as a zombie.
	incarnation int
	handle      *JobHandle
	pingedAt    time.Time
	startedAt   time.Time
}

// Controller is the scheduler of one pipeline.
type Controller struct {
	cfg Config

	mu         sync.Mutex
	state      State
	target     State
	partitions map[transport.PartitionID]*partition
	order      []transport.PartitionID
	seq        int
	complete   map[string]bool // computation → completed
	gcMarks    map[string]store.Timestamp
	sysMarks   map[string]store.Timestamp // stream → highest published SystemWatermark
	listedAt   time.Time                  // last listing of the sources' partitions
	stats      Stats
}

// Stats counts controller events.
type Stats struct {
	Cycles         int
	JobsStarted    int
	JobsFailed     int
	JobsLost       int
	LeasesExpired  int
	LeasesAborted  int
	LastCycleError string
}

// New builds a controller. Call Start (or set a target) and then Cycle/Run.
func New(cfg Config) (*Controller, error) {
	cfg.defaults()
	if cfg.Plan == nil || cfg.Store == nil || cfg.Hub == nil || cfg.Board == nil {
		return nil, errors.New("controller: config lacks plan, store, hub or board")
	}
	if len(cfg.Workers) == 0 {
		return nil, errors.New("controller: no workers")
	}
	if err := cfg.Plan.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg: cfg, state: Working, target: Working,
		partitions: map[transport.PartitionID]*partition{},
		complete:   map[string]bool{}, gcMarks: map[string]store.Timestamp{}, sysMarks: map[string]store.Timestamp{},
	}
	return c, nil
}

// Load restores the persisted pipeline state (a completed pipeline stays
// completed; a stopped or paused one stays so until Start).
func (c *Controller) Load(ctx context.Context) error {
	v, ok, err := c.cfg.Store.Get(ctx, store.FlowState, []byte(stateKey))
	if err != nil {
		return fmt.Errorf("controller: read pipeline state: %w", err)
	}
	for _, name := range c.cfg.Plan.Order() {
		for _, s := range c.cfg.Plan.Computations[name].Inputs {
			w, err := runtime.DedupFloor(ctx, c.cfg.Store, name, s)
			if err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			c.gcMarks[name+"\x00"+s] = w
		}
	}
	if ok {
		c.mu.Lock()
		c.state = State(v)
		if c.state == Completed || c.state == Stopped || c.state == Paused {
			c.target = c.state
		}
		c.mu.Unlock()
	}
	return nil
}

const stateKey = "pipeline_state"

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
	return c.stats
}

// SetTarget asks for a pipeline state: Working (start), Stopped (drain then
// stop), Paused (stop now). A completed pipeline cannot leave Completed.
func (c *Controller) SetTarget(t State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == Completed {
		return errors.New("controller: the pipeline is completed; recreate it to run again")
	}
	switch t {
	case Working, Stopped, Paused:
	default:
		return fmt.Errorf("controller: %q is not a target state (want working, stopped or paused)", t)
	}
	c.target = t
	return nil
}

// PartitionStatus describes one partition for status output.
type PartitionStatus struct {
	Partition transport.PartitionID
	Job       runtime.JobID
	Lease     store.LeaseID
	Worker    string
	Restarts  int
	LastError string
}

// Partitions lists the layout.
func (c *Controller) Partitions() []PartitionStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PartitionStatus
	for _, id := range c.order {
		p := c.partitions[id]
		ps := PartitionStatus{Partition: id, Restarts: p.restarts}
		if p.lastErr != nil {
			ps.LastError = p.lastErr.Error()
		}
		if p.job != nil {
			ps.Job, ps.Lease, ps.Worker = p.job.id, p.job.lease, p.job.worker.id
		}
		out = append(out, ps)
	}
	return out
}

// Lease returns the lease of the job running partition p (0 if none).
func (c *Controller) Lease(p transport.PartitionID) store.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pt, ok := c.partitions[p]; ok && pt.job != nil {
		return pt.job.lease
	}
	return 0
}

// Cycle runs one scheduling cycle, in Flow's order: check leases; while
// working or draining remove failed and lost jobs, lay out partitions,
// distribute jobs (lease first); ping leases; publish watermarks and
// garbage-collect dedup rows; advance the state machine.
func (c *Controller) Cycle(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Cycles++
	err := c.cycle(ctx)
	if err != nil {
		c.stats.LastCycleError = err.Error()
	}
	return err
}

func (c *Controller) cycle(ctx context.Context) error {
	st := c.cfg.Store
	now := st.Now()
	if err := c.layout(ctx); err != nil {
		return err
	}
	// Check leases: an expired or aborted lease removes its job.
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil {
			continue
		}
		ls, err := st.LeaseState(ctx, p.job.lease)
		if err != nil {
			return fmt.Errorf("controller: lease state of %s: %w", id, err)
		}
		if ls != store.LeaseActive {
			c.stats.LeasesExpired++
			c.removeJob(ctx, p, fmt.Errorf("job %s is lost since its lease is %s", p.job.id, ls))
		}
	}
	// Failed jobs and jobs on lost workers.
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil {
			continue
		}
		if done, err := p.job.handle.Done(); done {
			c.stats.JobsFailed++
			if err == nil {
				err = errors.New("job exited")
			}
			c.removeJob(ctx, p, err)
			continue
		}
		if !p.job.worker.aliveAt(now, c.cfg.LostWorkerTimeout) || p.job.worker.Incarnation() != p.job.incarnation {
			c.stats.JobsLost++
			c.removeJob(ctx, p, fmt.Errorf("worker %s is lost", p.job.worker.id))
			continue
		}
		// A job that posts no status for the lost-job timeout is stuck.
		seen := p.job.startedAt
		if st, ok := c.cfg.Board.Status(id); ok && st.Job == p.job.id && st.At.After(seen) {
			seen = st.At
		}
		if now.Sub(seen) >= c.cfg.LostWorkerTimeout {
			c.stats.JobsLost++
			c.removeJob(ctx, p, fmt.Errorf("job %s posted no status for %v", p.job.id, now.Sub(seen)))
		}
	}

	c.publishControls(ctx)
	c.advanceState(ctx)

	switch c.state {
	case Working, Draining:
		for _, id := range c.order {
			p := c.partitions[id]
			if p.job == nil && !c.complete[p.comp.Name] {
				if err := c.startJob(ctx, p); err != nil {
					return err
				}
			}
		}
	default:
		c.stopAllJobs(ctx)
	}
	// Ping live leases.
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil || now.Sub(p.job.pingedAt) < c.cfg.LeasePingPeriod {
			continue
		}
		if err := st.PingLease(ctx, p.job.lease); err != nil {
			if store.Classify(err) == store.ClassLeaseLost {
				c.removeJob(ctx, p, err)
				continue
			}
			// A failed ping is retried next cycle; if pings keep failing the
			// lease expires and the job is replaced.
			c.cfg.Logf("controller: ping lease of %s: %v", id, err)
			continue
		}
		p.job.pingedAt = now
	}
	return nil
}

// layout creates the partitions on first use — key-hash ranges for keyed
// computations, one partition per source partition for source computations —
// and then re-lists the sources every SourceRelistPeriod, adding a partition
// (and a job) for every source partition that appeared (a Kafka topic's
// partition count grew). Partitions are never removed.
func (c *Controller) layout(ctx context.Context) error {
	now := c.cfg.Store.Now()
	first := len(c.partitions) == 0
	if !first && now.Sub(c.listedAt) < c.cfg.SourceRelistPeriod {
		return nil
	}
	c.listedAt = now
	for _, name := range c.cfg.Plan.Order() {
		comp := c.cfg.Plan.Computations[name]
		if comp.IsSource() {
			keys, err := comp.Source.Partitions(ctx)
			if err != nil {
				if first {
					return fmt.Errorf("controller: list partitions of %s's source: %w", name, err)
				}
				c.cfg.Logf("controller: re-list partitions of %s's source: %v", name, err)
				continue
			}
			for _, k := range keys {
				id := runtime.SourcePartitionID(name, k)
				if _, ok := c.partitions[id]; ok {
					continue
				}
				if !first {
					c.cfg.Logf("controller: source partition %s appeared; starting a job for it", id)
				}
				c.addPartition(comp, runtime.PartitionSpec{ID: id, SourceKey: k})
			}
			continue
		}
		if !first {
			continue
		}
		for i := 0; i < comp.Partitions; i++ {
			lo, hi, toEnd := runtime.PartitionRange(i, comp.Partitions)
			c.addPartition(comp, runtime.PartitionSpec{ID: runtime.KeyedPartitionID(name, i), Index: i, Lo: lo, Hi: hi, ToEnd: toEnd})
		}
	}
	return nil
}

func (c *Controller) addPartition(comp *runtime.CompPlan, spec runtime.PartitionSpec) {
	c.partitions[spec.ID] = &partition{comp: comp, spec: spec}
	c.order = append(c.order, spec.ID)
}

// removeJob stops tracking p's job and aborts its lease. When AbortLease
// returns, no commit of the job can succeed any more, so a replacement may
// start. The job's goroutine is told to stop but need not have stopped.
func (c *Controller) removeJob(ctx context.Context, p *partition, reason error) {
	j := p.job
	p.job = nil
	if reason != nil {
		p.lastErr = reason
		c.cfg.Logf("controller: removing job %s of %s: %v", j.id, p.spec.ID, reason)
	}
	j.handle.Stop()
	if err := c.cfg.Store.AbortLease(ctx, j.lease); err != nil {
		// Abort is idempotent; an error here (a closed store) means the lease
		// may still be alive, so the partition must not be restarted.
		c.cfg.Logf("controller: abort lease %s: %v", j.lease, err)
		p.job = j
		return
	}
	c.stats.LeasesAborted++
}

// stopAllJobs removes every job and aborts its lease. REQUIRES: c.mu held.
func (c *Controller) stopAllJobs(ctx context.Context) {
	for _, id := range c.order {
		if p := c.partitions[id]; p.job != nil {
			c.removeJob(ctx, p, nil)
		}
	}
}

// startJob creates a lease and then the job, on the least loaded live worker.
func (c *Controller) startJob(ctx context.Context, p *partition) error {
	now := c.cfg.Store.Now()
	var w *Worker
	for _, cand := range c.cfg.Workers {
		if !cand.aliveAt(now, c.cfg.LostWorkerTimeout) {
			continue
		}
		if w == nil || cand.load() < w.load() {
			w = cand
		}
	}
	if w == nil {
		return nil // no live worker: retry next cycle
	}
	lease, err := c.cfg.Store.CreateLease(ctx, c.cfg.LeaseTimeout)
	if err != nil {
		return fmt.Errorf("controller: create lease for %s: %w", p.spec.ID, err)
	}
	c.seq++
	id := runtime.JobID(fmt.Sprintf("%s#%d", p.spec.ID, c.seq))
	cfg := runtime.Config{
		Plan: c.cfg.Plan, Comp: p.comp, Partition: p.spec, JobID: id, Lease: lease,
		Store: c.cfg.Store, Hub: c.cfg.Hub, Board: c.cfg.Board, Hooks: c.cfg.Hooks,
		Rand: rand.New(rand.NewPCG(c.cfg.Rand.Uint64(), uint64(lease))), Logf: c.cfg.Logf,
	}
	h, err := w.start(cfg)
	if err != nil {
		_ = c.cfg.Store.AbortLease(ctx, lease)
		return fmt.Errorf("controller: start job for %s: %w", p.spec.ID, err)
	}
	if p.job == nil && p.lastErr != nil {
		p.restarts++
	}
	p.job = &jobEntry{id: id, lease: lease, worker: w, incarnation: w.Incarnation(), handle: h, pingedAt: now, startedAt: now}
	c.stats.JobsStarted++
	return nil
}

// publishControls computes stream watermarks and completion from the job
// statuses, publishes each computation's control, and garbage-collects
// dedup rows below the new system watermarks.
func (c *Controller) publishControls(ctx context.Context) {
	plan := c.cfg.Plan
	draining := c.state == Draining || c.target == Stopped
	// Completion, upstream first (plan order is by name; iterate to a fixed point).
	for changed := true; changed; {
		changed = false
		for _, name := range plan.Order() {
			if c.complete[name] {
				continue
			}
			if c.computationComplete(plan.Computations[name]) {
				c.complete[name] = true
				changed = true
				c.cfg.Logf("controller: computation %s completed", name)
			}
		}
	}
	sysWM := map[string]store.Timestamp{}
	eventWM := map[string]time.Time{}
	for _, name := range plan.Order() {
		comp := plan.Computations[name]
		for _, s := range comp.Outputs {
			if c.complete[name] {
				sysWM[s] = store.Timestamp(^uint64(0) >> 1)
				eventWM[s] = farFuture
				continue
			}
			var wm store.Timestamp
			var ev time.Time
			known, first, anyActive := true, true, false
			var idleMax time.Time
			for _, id := range c.order {
				p := c.partitions[id]
				if p.comp != comp {
					continue
				}
				st, ok := c.cfg.Board.Status(id)
				if !ok {
					known = false
					break
				}
				w := st.SystemWM[s]
				if first || w < wm {
					wm = w
				}
				first = false
				if st.EventIdle {
					if st.EventWM.After(idleMax) {
						idleMax = st.EventWM
					}
					continue
				}
				if !anyActive || st.EventWM.Before(ev) {
					ev = st.EventWM
				}
				anyActive = true
			}
			if !known {
				wm, ev = 0, time.Time{}
			} else if !anyActive {
				ev = idleMax
			}
			// A watermark once published stays true ("every message below it
			// is processed"), so it never goes down, even when a restarted
			// writer reports a lower bound for outputs it reloaded.
			wm = max(wm, c.sysMarks[s])
			c.sysMarks[s] = wm
			sysWM[s], eventWM[s] = wm, ev
		}
	}
	for _, name := range plan.Order() {
		comp := plan.Computations[name]
		ctl := runtime.Control{InputSystemWM: map[string]store.Timestamp{}, Draining: draining}
		up := true
		for _, u := range plan.Upstream(comp) {
			up = up && c.complete[u.Name]
		}
		ctl.UpstreamDone = up && !comp.IsSource()
		first := true
		for _, s := range comp.Inputs {
			ctl.InputSystemWM[s] = sysWM[s]
			if first || eventWM[s].Before(ctl.EventWM) {
				ctl.EventWM = eventWM[s]
			}
			first = false
		}
		if ctl.UpstreamDone {
			ctl.EventWM = farFuture
		}
		c.cfg.Board.SetControl(name, ctl)
		for _, s := range comp.Inputs {
			wm := c.appliedWatermark(comp, s)
			if wm > c.gcMarks[name+"\x00"+s] && wm != 0 {
				if err := runtime.GCDedup(ctx, c.cfg.Store, name, s, wm); err != nil {
					c.cfg.Logf("controller: dedup GC of %s/%s: %v", name, s, err)
					continue
				}
				c.gcMarks[name+"\x00"+s] = wm
			}
		}
	}
}

// appliedWatermark is the lowest input SystemWatermark of stream s that
// every partition of comp reports to use (0 if any partition has not
// reported): dedup rows below it are safe to delete.
func (c *Controller) appliedWatermark(comp *runtime.CompPlan, s string) store.Timestamp {
	var wm store.Timestamp
	first := true
	for _, id := range c.order {
		if c.partitions[id].comp != comp {
			continue
		}
		st, ok := c.cfg.Board.Status(id)
		if !ok {
			return 0
		}
		if w := st.AppliedInputWM[s]; first || w < wm {
			wm, first = w, false
		}
	}
	return wm
}

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// computationComplete: every upstream computation is complete and every
// partition reports Drained (for keyed computations, with the upstream
// completion already seen).
func (c *Controller) computationComplete(comp *runtime.CompPlan) bool {
	if !comp.IsSource() {
		for _, u := range c.cfg.Plan.Upstream(comp) {
			if !c.complete[u.Name] {
				return false
			}
		}
	}
	for _, id := range c.order {
		p := c.partitions[id]
		if p.comp != comp {
			continue
		}
		st, ok := c.cfg.Board.Status(id)
		if !ok || !st.Drained || (!comp.IsSource() && !st.UpstreamDoneSeen) {
			return false
		}
	}
	return true
}

// advanceState moves the pipeline state machine.
func (c *Controller) advanceState(ctx context.Context) {
	prev := c.state
	allComplete := len(c.complete) == len(c.cfg.Plan.Computations)
	switch {
	case c.state == Completed:
	case allComplete && (c.state == Working || c.state == Draining):
		c.state = Completed
	case c.target == Working:
		c.state = Working
	case c.target == Stopped:
		if c.state == Working {
			c.state = Draining
		}
		if c.state == Draining && c.quiet() {
			c.state = Stopped
		}
		if c.state == Paused || c.state == Pausing {
			c.state = Stopped
		}
	case c.target == Paused:
		if c.state != Paused {
			c.state = Paused
		}
	}
	if c.state != prev {
		c.cfg.Logf("controller: pipeline %s → %s", prev, c.state)
		if err := c.cfg.Store.Commit(ctx, putState(c.state)); err != nil {
			c.cfg.Logf("controller: persist state %s: %v", c.state, err)
		}
	}
}

func putState(s State) *store.Txn {
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(stateKey), []byte(s))
	return txn
}

// quiet: every partition reports nothing in flight, in a report made while
// draining.
func (c *Controller) quiet() bool {
	for _, id := range c.order {
		st, ok := c.cfg.Board.Status(id)
		if !ok || !st.Quiet || !st.DrainingSeen {
			return false
		}
	}
	return true
}

// Run cycles until ctx ends or the pipeline reaches Completed or Stopped; it
// then stops every job. A paused pipeline keeps cycling, waiting for a new
// target.
func (c *Controller) Run(ctx context.Context) (State, error) {
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
				c.mu.Lock()
				c.stopAllJobs(ctx)
				c.mu.Unlock()
				return c.State(), fmt.Errorf("controller: the store can no longer be used; restart to recover: %w", err)
			}
			c.cfg.Logf("controller: cycle: %v", err)
		}
		switch s := c.State(); s {
		case Completed, Stopped:
			c.mu.Lock()
			c.stopAllJobs(ctx)
			c.mu.Unlock()
			return s, nil
		}
		select {
		case <-ctx.Done():
			return c.State(), ctx.Err()
		case <-t.C:
		}
	}
}
