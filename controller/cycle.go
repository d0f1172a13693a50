package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// Cycle runs one scheduling cycle in three parts (Flow's DoScheduling
// order):
//
//   - observe, without the mutex: the store's clock and a timestamp, the
//     state of every current job's lease, and (with SyncListings, or on the
//     first cycle) the sources' partitions;
//   - decide, under the mutex, touching only memory: remove jobs whose
//     lease ended, that failed or whose worker is lost; mark computations
//     complete; advance the state machine; compute and publish watermarks
//     and controls; choose the jobs to start and the leases to ping;
//   - apply, without the mutex, in a fixed order: abort the removed jobs'
//     leases (each a barrier), persist the state, collect dedup rows,
//     persist the published marks, create leases and start jobs — only for
//     partitions whose previous lease's abort returned —, ping leases.
//
// What a step decided is recorded in the returned effects, so a cycle is
// the same function of (memory, observation) whoever drives it.
func (c *Controller) Cycle(ctx context.Context) error {
	apply, err := c.CycleDecide(ctx)
	if err == nil {
		err = apply(ctx)
	}
	return err
}

// CycleDecide runs the observe and decide halves of a cycle and returns
// its apply half. Cycle runs both at once; a driver that steps jobs itself
// (internal/sim) may run job epochs in between, as the goroutines of a
// real process can: the decisions (state, controls) are published in
// memory before the apply half aborts leases and starts jobs. The returned
// function must be called exactly once, before the next cycle.
func (c *Controller) CycleDecide(ctx context.Context) (apply func(context.Context) error, err error) {
	err = c.firstLayout(ctx)
	var obs observation
	if err == nil {
		obs, err = c.observe(ctx)
	}
	c.mu.Lock()
	c.stats.Cycles++
	var eff effects
	if err == nil {
		eff = c.decide(obs)
	}
	c.mu.Unlock()
	if err != nil {
		c.recordCycleError(err)
		return nil, err
	}
	return func(ctx context.Context) error {
		err := c.apply(ctx, obs.now, &eff)
		if err != nil {
			c.recordCycleError(err)
		}
		return err
	}, nil
}

func (c *Controller) recordCycleError(err error) {
	c.mu.Lock()
	c.stats.LastCycleError = err.Error()
	c.mu.Unlock()
}

// observation is what a cycle reads from outside its memory.
type observation struct {
	now time.Time
	// ts is a fresh store timestamp: the SystemWatermark of computations
	// that complete in this cycle.
	ts store.Timestamp
	// leases holds the state of every current job's lease, by lease id.
	leases map[store.LeaseID]store.LeaseState
	// listing is a synchronous listing of the sources (SyncListings).
	listing *listing
}

func (c *Controller) observe(ctx context.Context) (observation, error) {
	st := c.cfg.Store
	obs := observation{now: st.Now(), leases: map[store.LeaseID]store.LeaseState{}}
	c.mu.Lock()
	var leases []store.LeaseID
	for _, id := range c.order {
		if j := c.partitions[id].job; j != nil {
			leases = append(leases, j.lease)
		}
	}
	relist := c.cfg.SyncListings && obs.now.Sub(c.listing.startedAt) >= c.cfg.SourceRelistPeriod
	c.mu.Unlock()
	for _, l := range leases {
		ls, err := st.LeaseState(ctx, l)
		if err != nil {
			return obs, fmt.Errorf("controller: lease state of %s: %w", l, err)
		}
		obs.leases[l] = ls
	}
	var err error
	if obs.ts, err = st.Timestamp(ctx); err != nil {
		return obs, fmt.Errorf("controller: timestamp: %w", err)
	}
	if relist {
		l := c.listSources(ctx)
		obs.listing = &l
	}
	return obs, nil
}

// effects are the decisions of one cycle that touch the store or the
// workers, in the order apply carries them out.
type effects struct {
	aborts []removal
	state  *State
	gc     []dedupGC
	// frontiers: computations whose frontier rows of earlier layouts are
	// looked at (frontiergc.go).
	frontiers []frontierGC
	marks     []byte
	// layout: a rescale's switch to commit (rescale.go).
	layout *layoutSwitch
	starts []start
	pings  []ping
}

// removal is a job removed from the layout: its lease must be aborted.
type removal struct {
	p   *partition
	job *jobEntry
}

// dedupGC deletes comp's dedup rows of stream below wm.
type dedupGC struct {
	comp, stream string
	wm           store.Timestamp
}

// start is a job to start on a worker (its lease is created first).
type start struct {
	p      *partition
	worker Worker
}

// ping extends a live job's lease.
type ping struct {
	p   *partition
	job *jobEntry
}

// decide runs the memory half of a cycle. REQUIRES: c.mu held.
func (c *Controller) decide(obs observation) effects {
	var eff effects
	now := obs.now
	if obs.listing != nil {
		c.applyListing(*obs.listing, false, now)
		c.listing.startedAt = now
	} else if !c.cfg.SyncListings {
		c.relist(now)
	}
	// Check leases: an expired or aborted lease removes its job.
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil {
			continue
		}
		if ls, ok := obs.leases[p.job.lease]; ok && ls != store.LeaseActive {
			c.stats.LeasesExpired++
			c.removeJob(&eff, p, fmt.Errorf("job %s is lost since its lease is %s", p.job.id, ls), now)
		}
	}
	c.removeFailedJobs(&eff, now)
	c.updateCompletion(obs.ts)
	c.advanceState(&eff, now)
	c.decideRescale(&eff, now)
	c.publishControls(&eff, now)
	c.decideFrontierGC(&eff, now)
	switch c.state {
	case Working, Draining:
		load := c.jobLoads()
		for _, id := range c.order {
			p := c.partitions[id]
			if p.job == nil && !c.complete[p.comp.Name] && !now.Before(p.restartAt) && !c.held(p) {
				if w := c.chooseWorker(now, load); w != nil {
					load[w]++
					eff.starts = append(eff.starts, start{p: p, worker: w})
				}
			}
		}
		if c.cfg.Balance && c.state == Working {
			c.balance(&eff, now, load)
		}
	default:
		c.stopAllJobs(&eff, now)
	}
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job != nil && now.Sub(p.job.pingedAt) >= c.cfg.LeasePingPeriod {
			eff.pings = append(eff.pings, ping{p: p, job: p.job})
		}
	}
	c.noteResumed(now)
	c.flushFailures(now)
	return eff
}

// apply carries out a cycle's effects. It takes the mutex only to record
// results, never across a store call.
func (c *Controller) apply(ctx context.Context, now time.Time, eff *effects) error {
	st := c.cfg.Store
	var startErr error
	aborted := c.abortAll(ctx, eff.aborts)
	if eff.state != nil {
		if err := st.Commit(ctx, putState(*eff.state)); err != nil {
			c.cfg.Logf("controller: persist state %s: %v", *eff.state, err)
		} else {
			c.mu.Lock()
			c.statePersisted = c.state == *eff.state
			c.mu.Unlock()
		}
	}
	for _, g := range eff.gc {
		if err := tables.GCDedup(ctx, st, g.comp, g.stream, g.wm); err != nil {
			c.cfg.Logf("controller: dedup GC of %s/%s: %v", g.comp, g.stream, err)
			continue
		}
		c.mu.Lock()
		key := g.comp + "\x00" + g.stream
		c.marks.gc[key] = max(c.marks.gc[key], g.wm)
		c.mu.Unlock()
	}
	for _, g := range eff.frontiers {
		c.collectFrontiers(ctx, g)
	}
	if eff.marks != nil {
		c.persistMarks(ctx, eff.marks, now)
	}
	if eff.layout != nil && !failed(aborted) {
		if err := c.switchLayout(ctx, eff.layout, now); err != nil {
			if errors.Is(err, store.ErrUnusable) || errors.Is(err, store.ErrClosed) {
				return err
			}
			c.cfg.Logf("%v; trying again", err)
		} else {
			eff.starts = append(eff.starts, c.startsAfterSwitch(now)...)
		}
	}
	for _, s := range eff.starts {
		if aborted[s.p] == abortFailed {
			continue // the previous lease may still be alive
		}
		if err := c.startJob(ctx, s, now); err != nil {
			if errors.Is(err, store.ErrUnusable) || errors.Is(err, store.ErrClosed) {
				return err
			}
			// One start failing (a worker that cannot be reached, a lease
			// that cannot be created) must not hold up the other starts
			// and the pings: the partition is tried again next cycle.
			startErr = err
		}
	}
	for _, pg := range eff.pings {
		if aborted[pg.p] != 0 {
			continue
		}
		err := st.PingLease(ctx, pg.job.lease)
		c.mu.Lock()
		current := pg.p.job == pg.job
		var lost effects
		switch {
		case err == nil && current:
			pg.job.pingedAt = now
		case err != nil && store.Classify(err) == store.ClassLeaseLost && current:
			c.removeJob(&lost, pg.p, err, now)
		case err != nil:
			// A failed ping is retried next cycle; if pings keep failing
			// the lease expires and the job is replaced.
			c.cfg.Logf("controller: ping lease of %s: %v", pg.p.spec.ID, err)
		}
		c.mu.Unlock()
		c.abortAll(ctx, lost.aborts)
	}
	return startErr
}

// failed reports whether an abort of this cycle failed.
func failed(aborted map[*partition]int) bool {
	for _, o := range aborted {
		if o == abortFailed {
			return true
		}
	}
	return false
}

// abort outcomes.
const (
	abortDone = 1 + iota
	abortFailed
)

// abortAll aborts the removed jobs' leases, in order. AbortLease is a
// barrier: when it returns, no commit of the job can succeed any more. If
// it fails (a closed store) the lease may still be alive, so the job is
// put back in the layout and its partition is not restarted.
func (c *Controller) abortAll(ctx context.Context, rs []removal) map[*partition]int {
	out := map[*partition]int{}
	for _, r := range rs {
		err := c.cfg.Store.AbortLease(ctx, r.job.lease)
		c.mu.Lock()
		if err != nil {
			c.cfg.Logf("controller: abort lease %s: %v", r.job.lease, err)
			if r.p.job == nil {
				r.p.job = r.job
				c.cfg.Board.Assign(r.p.spec.ID, r.job.id)
			}
			out[r.p] = abortFailed
		} else {
			c.stats.LeasesAborted++
			out[r.p] = abortDone
		}
		c.mu.Unlock()
	}
	return out
}

// stopAll removes every job and aborts its lease (Run's end).
func (c *Controller) stopAll(ctx context.Context) {
	var eff effects
	c.mu.Lock()
	c.stopAllJobs(&eff, c.cfg.Store.Now())
	c.mu.Unlock()
	c.abortAll(ctx, eff.aborts)
}

// startJob creates a lease, then starts the job on the worker decide chose.
func (c *Controller) startJob(ctx context.Context, s start, now time.Time) error {
	st := c.cfg.Store
	c.mu.Lock()
	last := s.p.lastLease
	fences, ok := c.resumeFences(s.p)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("controller: %s waits for the jobs of the computations writing its inputs (a rescale's new layout)", s.p.spec.ID)
	}
	if invariants.Enabled && last != 0 {
		// At most one live lease per partition: the previous job's lease
		// ended (aborted, or found expired) before a new one is created.
		ls, err := st.LeaseState(ctx, last)
		invariants.Check(err != nil || ls != store.LeaseActive, "partition %s gets a new lease while %s is active", s.p.spec.ID, last)
	}
	lease, err := st.CreateLease(ctx, c.cfg.LeaseTimeout)
	if err != nil {
		return fmt.Errorf("controller: create lease for %s: %w", s.p.spec.ID, err)
	}
	c.mu.Lock()
	p := s.p
	p.lastLease = lease
	c.seq++
	id := plan.JobID(fmt.Sprintf("%s#%s%d", p.spec.ID, c.cfg.JobIDPrefix, c.seq))
	spec := plan.JobSpec{Plan: c.plan, Comp: p.comp, Partition: p.spec, JobID: id, Lease: lease, Seed: c.cfg.Rand.Uint64(), Fences: fences}
	// The board accepts the job's first post (from Init) only once it owns
	// the partition.
	c.cfg.Board.Assign(p.spec.ID, id)
	c.mu.Unlock()
	// Start may be a call to another machine: never under the mutex. The
	// partition has no job meanwhile; nothing but this cycle starts one.
	h, err := s.worker.Start(spec)
	c.mu.Lock()
	if err != nil {
		c.cfg.Board.Release(p.spec.ID)
		c.mu.Unlock()
		_ = st.AbortLease(ctx, lease)
		return fmt.Errorf("controller: start job for %s: %w", p.spec.ID, err)
	}
	if p.lastErr != nil {
		p.restarts++
	}
	p.job = &jobEntry{id: id, lease: lease, worker: s.worker, incarnation: s.worker.Incarnation(), handle: h, pingedAt: now, startedAt: now}
	c.stats.JobsStarted++
	c.mu.Unlock()
	return nil
}
