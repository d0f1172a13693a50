package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/runtime"
	"github.com/weir-stream/weir/store"
)

// removeFailedJobs removes the jobs that failed (exited, stopped on a sink
// failure, or posted no status for the lost-job timeout) — these restart
// with backoff — and the jobs of lost workers, which restart at once. A
// job that has run RestartBackoffMax without failing resets its
// partition's failure count. REQUIRES: c.mu held.
func (c *Controller) removeFailedJobs(ctx context.Context, now time.Time) {
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
			c.fail(ctx, p, err, now)
			continue
		}
		if !p.job.worker.aliveAt(now, c.cfg.LostWorkerTimeout) || p.job.worker.Incarnation() != p.job.incarnation {
			c.stats.JobsLost++
			c.removeJob(ctx, p, fmt.Errorf("worker %s is lost", p.job.worker.id), now)
			continue
		}
		st, reported := c.cfg.Board.Status(id) // posted by this job: the board drops others
		if reported && len(st.SinkFailures) > 0 {
			// A sink whose retries ran out stops the partition's progress
			// through it; a new job reloads the outbox and tries again.
			c.stats.JobsFailed++
			p.sinkFailures = st.SinkFailures
			c.fail(ctx, p, sinkFailure(st.SinkFailures), now)
			continue
		}
		// A job that posts no status for the lost-job timeout is stuck.
		seen := p.job.startedAt
		if reported && st.At.After(seen) {
			seen = st.At
		}
		if now.Sub(seen) >= c.cfg.LostWorkerTimeout {
			c.stats.JobsLost++
			c.fail(ctx, p, fmt.Errorf("job %s posted no status for %v", p.job.id, now.Sub(seen)), now)
			continue
		}
		if p.failures > 0 && reported && now.Sub(p.job.startedAt) >= c.cfg.RestartBackoffMax {
			c.logRecovery(p)
			p.failures, p.sinkFailures = 0, nil
		}
	}
}

func sinkFailure(f map[string]string) error {
	ids := make([]string, 0, len(f))
	for id := range f {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "sink %s stopped delivering: %s", id, f[id])
	}
	return errors.New(b.String())
}

// fail removes p's failed job and delays the next start by the backoff of
// the partition's consecutive failures. REQUIRES: c.mu held.
func (c *Controller) fail(ctx context.Context, p *partition, err error, now time.Time) {
	if !c.removeJob(ctx, p, err, now) {
		return
	}
	p.failures++
	d := c.backoff(p.failures)
	p.restartAt = now.Add(d)
	if d > 0 {
		c.cfg.Logf("controller: %s failed %d time(s) in a row; next job in %v", p.spec.ID, p.failures, d)
	}
	c.logFailure(p, now)
}

// backoff is the delay after the n-th consecutive failure (n ≥ 1):
// RestartBackoff·2^(n-1), capped at RestartBackoffMax.
func (c *Controller) backoff(n int) time.Duration {
	if c.cfg.RestartBackoff < 0 {
		return 0
	}
	d := c.cfg.RestartBackoff
	for i := 1; i < n && d < c.cfg.RestartBackoffMax; i++ {
		d *= 2
	}
	return min(d, c.cfg.RestartBackoffMax)
}

// removeJob stops tracking p's job and aborts its lease. When AbortLease
// returns, no commit of the job can succeed any more, so a replacement may
// start; the board forgets the job's status and drops its later posts. The
// job's goroutine is told to stop but need not have stopped: it is tracked
// until it exits (pausing → paused waits for that). It reports whether the
// job was removed. REQUIRES: c.mu held.
func (c *Controller) removeJob(ctx context.Context, p *partition, reason error, now time.Time) bool {
	j := p.job
	p.job = nil
	if reason != nil {
		p.lastErr, p.lastErrAt = reason, now
		c.cfg.Logf("controller: removing job %s of %s: %v", j.id, p.spec.ID, reason)
	}
	j.handle.Stop()
	if err := c.cfg.Store.AbortLease(ctx, j.lease); err != nil {
		// Abort is idempotent; an error here (a closed store) means the lease
		// may still be alive, so the partition must not be restarted.
		c.cfg.Logf("controller: abort lease %s: %v", j.lease, err)
		p.job = j
		return false
	}
	c.stats.LeasesAborted++
	c.cfg.Board.Release(p.spec.ID)
	c.exiting = append(c.exiting, exitingJob{handle: j.handle, removedAt: now})
	return true
}

// stopAllJobs removes every job and aborts its lease. REQUIRES: c.mu held.
func (c *Controller) stopAllJobs(ctx context.Context, now time.Time) {
	for _, id := range c.order {
		if p := c.partitions[id]; p.job != nil {
			c.removeJob(ctx, p, nil, now)
		}
	}
}

// allExited prunes the removed jobs that have exited, or that have not
// exited within the lost-job timeout (stuck zombies, harmless since their
// leases are aborted), and reports whether none is left and no partition
// has a job. REQUIRES: c.mu held.
func (c *Controller) allExited(now time.Time) bool {
	keep := c.exiting[:0]
	for _, e := range c.exiting {
		if done, _ := e.handle.Done(); done {
			continue
		}
		if now.Sub(e.removedAt) >= c.cfg.LostWorkerTimeout {
			c.cfg.Logf("controller: a removed job has not exited after %v; no longer waiting for it", now.Sub(e.removedAt))
			continue
		}
		keep = append(keep, e)
	}
	clear(c.exiting[len(keep):])
	c.exiting = keep
	for _, id := range c.order {
		if c.partitions[id].job != nil {
			return false
		}
	}
	return len(c.exiting) == 0
}

// startJob creates a lease and then the job, on the least loaded live
// worker. REQUIRES: c.mu held.
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
	if invariants.Enabled && p.lastLease != 0 {
		// At most one live lease per partition: the previous job's lease
		// ended (aborted, or found expired) before a new one is created.
		ls, err := c.cfg.Store.LeaseState(ctx, p.lastLease)
		invariants.Check(err != nil || ls != store.LeaseActive, "partition %s gets a new lease while %s is active", p.spec.ID, p.lastLease)
	}
	lease, err := c.cfg.Store.CreateLease(ctx, c.cfg.LeaseTimeout)
	if err != nil {
		return fmt.Errorf("controller: create lease for %s: %w", p.spec.ID, err)
	}
	p.lastLease = lease
	c.seq++
	id := runtime.JobID(fmt.Sprintf("%s#%d", p.spec.ID, c.seq))
	cfg := runtime.Config{
		Plan: c.cfg.Plan, Comp: p.comp, Partition: p.spec, JobID: id, Lease: lease,
		Store: c.cfg.Store, Hub: c.cfg.Hub, Board: c.cfg.Board, Hooks: c.cfg.Hooks,
		Rand: rand.New(rand.NewPCG(c.cfg.Rand.Uint64(), uint64(lease))), Logf: c.cfg.Logf,
	}
	// The board accepts the job's first post (from Init) only once it owns
	// the partition.
	c.cfg.Board.Assign(p.spec.ID, id)
	h, err := w.start(cfg)
	if err != nil {
		c.cfg.Board.Release(p.spec.ID)
		_ = c.cfg.Store.AbortLease(ctx, lease)
		return fmt.Errorf("controller: start job for %s: %w", p.spec.ID, err)
	}
	if p.lastErr != nil {
		p.restarts++
	}
	p.job = &jobEntry{id: id, lease: lease, worker: w, incarnation: w.Incarnation(), handle: h, pingedAt: now, startedAt: now}
	c.stats.JobsStarted++
	return nil
}
