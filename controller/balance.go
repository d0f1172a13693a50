package controller

import "time"

// Count-based partition balancing (Flow's default balancer; its cpu_aware
// one weighs jobs by measured CPU, which this one does not).
//
// When workers join or leave, a cycle moves jobs so that no live worker
// holds more than ⌈partitions/workers⌉ of them: partitions with a job or
// waiting for one, over the live workers that take new jobs (not
// draining). A draining worker's jobs all move. A move is graceful: the
// job is asked to finish (Finisher: it stops after its epoch in flight,
// whose commit stands), and only once it has exited — or after
// LostWorkerTimeout, when it is stopped hard — is it removed like any
// other job: its lease is aborted (a barrier: no commit of it can land
// afterwards) and the partition's next job starts on the least loaded
// worker, in the same cycle. Nothing is lost or duplicated either way —
// the lease fences a job that did not finish — a graceful move only
// avoids redoing the epoch in flight.
//
// A worker without Finisher handles (a simulation's) is moved the hard
// way at once.

// balance asks the jobs above each live worker's bound to finish. load is
// jobLoads' count plus the starts this cycle already chose. REQUIRES: c.mu
// held; the pipeline is working.
func (c *Controller) balance(eff *effects, now time.Time, load map[Worker]int) {
	ws := c.workers()
	live := map[Worker]bool{}
	for _, w := range ws {
		if w.AliveAt(now, c.cfg.LostWorkerTimeout) && !draining(w) {
			live[w] = true
		}
	}
	if len(live) == 0 {
		return
	}
	want := 0
	for _, id := range c.order {
		if !c.complete[c.partitions[id].comp.Name] {
			want++
		}
	}
	bound := (want + len(live) - 1) / len(live)
	// room is how many jobs the live workers below their bound can take:
	// a move is made only into room, so that nothing moves back and forth.
	room := 0
	for w := range live {
		room += max(0, bound-load[w])
	}
	for _, w := range ws {
		if room == 0 {
			return
		}
		excess := load[w] - bound
		if !live[w] {
			if !w.AliveAt(now, c.cfg.LostWorkerTimeout) {
				continue // its jobs are removed as lost
			}
			excess = load[w] // draining: everything moves
		}
		for i := len(c.order) - 1; i >= 0 && excess > 0 && room > 0; i-- {
			p := c.partitions[c.order[i]]
			if !counted(p) || p.job.worker != w || c.complete[p.comp.Name] {
				continue
			}
			c.startMove(eff, p, now)
			excess--
			room--
		}
	}
}

// jobLoads counts each worker's load as balancing and placement weigh it:
// the current jobs of unfinished computations that are not being moved
// off. A completed computation's jobs stay, idle, and are not counted:
// counting them in placement but not in balancing (as a worker's own job
// count did) put a moved job back on the worker it was moved off, every
// cycle, and the pipeline never completed. REQUIRES: c.mu held.
func (c *Controller) jobLoads() map[Worker]int {
	load := map[Worker]int{}
	for _, id := range c.order {
		p := c.partitions[id]
		if counted(p) && !c.complete[p.comp.Name] {
			load[p.job.worker]++
		}
	}
	return load
}

// counted reports whether p's job counts towards its worker's load.
func counted(p *partition) bool { return p.job != nil && !p.job.finishing }

// startMove asks p's job to finish its epoch in flight; a cycle after it
// exited removes it (finishMove). A handle that cannot finish gracefully
// is removed at once. REQUIRES: c.mu held.
func (c *Controller) startMove(eff *effects, p *partition, now time.Time) {
	c.stats.Moves++
	c.cfg.Logf("controller: moving %s off worker %s", p.spec.ID, p.job.worker.ID())
	f, ok := p.job.handle.(Finisher)
	if !ok {
		c.removeJob(eff, p, nil, now)
		return
	}
	p.job.finishing, p.job.finishingAt = true, now
	f.Finish()
}

// finishMove removes a moved job that exited, or that did not finish
// within LostWorkerTimeout (it is stopped; its lease abort fences it). The
// partition restarts at once: a move is no failure. REQUIRES: c.mu held.
func (c *Controller) finishMove(eff *effects, p *partition, now time.Time) {
	c.removeJob(eff, p, nil, now)
}

// workers returns the controller's workers (the pool's, if it has one).
// REQUIRES: c.mu held.
func (c *Controller) workers() []Worker {
	if c.cfg.Pool != nil {
		return c.cfg.Pool.Workers()
	}
	return c.cfg.Workers
}

// Heartbeater is a Worker whose job statuses reach the controller with its
// heartbeats (a remote worker): a status is only as fresh as the last
// heartbeat, so a job is blamed for posting none only if its worker
// answered a heartbeat after the job's deadline. Otherwise a silent worker
// would make its jobs fail (and restart with backoff) before the worker is
// declared lost (and its jobs restarted at once).
type Heartbeater interface {
	// LastHeartbeat is when the worker last answered (store clock).
	LastHeartbeat() time.Time
}

// heardSince reports whether w answered after t (always, for a worker whose
// statuses do not travel with heartbeats).
func heardSince(w Worker, t time.Time) bool {
	h, ok := w.(Heartbeater)
	return !ok || h.LastHeartbeat().After(t)
}

// draining reports whether w is being emptied (Drainer).
func draining(w Worker) bool {
	d, ok := w.(Drainer)
	return ok && d.Draining()
}
