package controller

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// removeFailedJobs removes the jobs that failed (exited, stopped on a sink
// failure, or posted no status for the lost-job timeout) — these restart
// with backoff — and the jobs of lost workers, which restart at once. A
// job that has run RestartBackoffMax without failing resets its
// partition's failure count. REQUIRES: c.mu held.
func (c *Controller) removeFailedJobs(eff *effects, now time.Time) {
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil {
			continue
		}
		if done, _ := p.job.handle.Done(); done && p.job.finishing {
			c.finishMove(eff, p, now) // a graceful move: restart at once
			continue
		}
		if p.job.finishing && now.Sub(p.job.finishingAt) >= c.cfg.LostWorkerTimeout {
			c.finishMove(eff, p, now) // it did not finish in time: stop it
			continue
		}
		if done, err := p.job.handle.Done(); done {
			c.stats.JobsFailed++
			if err == nil {
				err = errors.New("job exited")
			}
			c.fail(eff, p, err, now)
			continue
		}
		if !p.job.worker.AliveAt(now, c.cfg.LostWorkerTimeout) || p.job.worker.Incarnation() != p.job.incarnation {
			c.stats.JobsLost++
			c.removeJob(eff, p, fmt.Errorf("worker %s is lost", p.job.worker.ID()), now)
			continue
		}
		st, reported := c.cfg.Board.Status(id) // posted by this job: the board drops others
		if reported && len(st.SinkFailures) > 0 {
			// A sink whose retries ran out stops the partition's progress
			// through it; a new job reloads the outbox and tries again.
			c.stats.JobsFailed++
			p.sinkFailures = st.SinkFailures
			c.fail(eff, p, sinkFailure(st.SinkFailures), now)
			continue
		}
		// A job that posts no status for the lost-job timeout is stuck.
		seen := p.job.startedAt
		if reported && st.At.After(seen) {
			seen = st.At
		}
		if now.Sub(seen) >= c.cfg.LostWorkerTimeout && heardSince(p.job.worker, seen.Add(c.cfg.LostWorkerTimeout)) {
			c.stats.JobsLost++
			c.fail(eff, p, fmt.Errorf("job %s posted no status for %v", p.job.id, now.Sub(seen)), now)
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
func (c *Controller) fail(eff *effects, p *partition, err error, now time.Time) {
	c.removeJob(eff, p, err, now)
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

// removeJob stops tracking p's job: it tells the job to stop, makes the
// board forget its status and drop its later posts, and adds the abort of
// its lease to eff. When that AbortLease returns (in apply, before any new
// lease is created), no commit of the job can succeed any more, so a
// replacement may start. The job's goroutine need not have stopped: it is
// tracked until it exits (pausing → paused waits for that). REQUIRES: c.mu
// held.
func (c *Controller) removeJob(eff *effects, p *partition, reason error, now time.Time) {
	j := p.job
	p.job = nil
	if reason != nil {
		p.lastErr, p.lastErrAt = reason, now
		c.cfg.Logf("controller: removing job %s of %s: %v", j.id, p.spec.ID, reason)
	}
	j.handle.Stop()
	c.cfg.Board.Release(p.spec.ID)
	c.exiting = append(c.exiting, exitingJob{handle: j.handle, removedAt: now})
	eff.aborts = append(eff.aborts, removal{p: p, job: j})
}

// stopAllJobs removes every job (their leases are aborted in apply).
// REQUIRES: c.mu held.
func (c *Controller) stopAllJobs(eff *effects, now time.Time) {
	for _, id := range c.order {
		if p := c.partitions[id]; p.job != nil {
			c.removeJob(eff, p, nil, now)
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

// chooseWorker returns the live worker with the least load (jobLoads plus
// the starts this cycle already chose for it; nil if none is live): the
// same count balancing bounds, so a placed job is not moved again.
// REQUIRES: c.mu held.
func (c *Controller) chooseWorker(now time.Time, load map[Worker]int) Worker {
	var w Worker
	for _, cand := range c.workers() {
		if !cand.AliveAt(now, c.cfg.LostWorkerTimeout) || draining(cand) {
			continue
		}
		if w == nil || load[cand] < load[w] {
			w = cand
		}
	}
	return w
}
