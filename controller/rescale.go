package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// A rescale changes a keyed computation C's partition count while the
// pipeline runs, exactly once. State, timers and external state are keyed
// by key hash, dedup rows by computation, and dedup frontiers by key range
// (job/dedup.go: a new range consults the rows of every earlier range by
// the message's key), so none of them moves. What is laid out by partition
// is what is in flight, and the protocol empties or fences it:
//
//  1. Quiesce. C's control says Quiesce: its jobs take no input (no
//     buffered message, no timer) and deliver their outboxes. A sender id
//     (C/3) names another key range in the next layout, and its receivers'
//     ordered frontiers would drop an old output offered after a new one;
//     so no output of the old layout may be in flight when the new jobs
//     send. Upstream jobs keep running; their outputs for C wait in its
//     buffers and their outboxes. The rest of the pipeline is untouched.
//  2. Stop. Once every partition of C reports Quiesced, C's jobs and the
//     jobs of the computations writing C's inputs are removed and their
//     leases aborted: no life that routes by the old layout can commit
//     again (an abort returns only after every commit that saw the lease).
//  3. Switch. One commit of the layout record sets C's count (fenced by the
//     leadership in the distributed mode). C's partitions are laid out
//     anew, the buffers of the old ones dropped, and the plan of the new
//     layout goes with every job started from then on.
//  4. Resume. C's new jobs and the upstream jobs start; the upstream jobs
//     reload their outboxes and offer what was not acknowledged by the new
//     ranges. A message a dead life routed by the old layout and that still
//     reaches a partition is acknowledged unprocessed there
//     (job/deliver.go: fetchInputs), since no commit of its sender can
//     erase it.
//
// A crash before the switch leaves the target in the record, and the next
// controller starts again at 1; after it, the next controller runs the new
// layout. A pipeline leaving Working (a stop, a pause) abandons a quiesce
// — a drain needs C's input — and takes it up again when working; a
// switch, once its jobs are stopped, completes in any state.

// rescaling is the rescale under way.
type rescaling struct {
	comp     string
	from, to int
	// switching: the quiesce is over; C's and its upstream jobs are being
	// stopped, then the layout committed.
	switching bool
	began     time.Time
	quiesced  time.Time
}

// RescaleReport describes a finished rescale, for status and figures.
type RescaleReport struct {
	Computation string
	From, To    int
	// Began is when C's jobs were told to quiesce; Quiesced when the last
	// reported it; Committed when the new layout was committed; Resumed
	// when every new partition's job first reported (store clock). The
	// pause C sees runs from Began (it takes no input) to Resumed.
	Began, Quiesced, Committed, Resumed time.Time
}

// Pause is how long the computation took no input.
func (r RescaleReport) Pause() time.Duration { return r.Resumed.Sub(r.Began) }

// Rescale asks for computation comp to run on n partitions, while the
// pipeline runs. The target is persisted before Rescale returns, so a
// controller that takes over carries it out; Rescales reports it done.
// Asking for another count while comp quiesces retargets that rescale;
// once it switches, the other count is the next rescale. Asking for the
// current count cancels a rescale not yet switched (comp takes input
// again).
func (c *Controller) Rescale(ctx context.Context, comp string, n int) error {
	c.mu.Lock()
	cp, ok := c.plan.Computations[comp]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("controller: no computation %q to rescale", comp)
	}
	if err := cp.Rescalable(); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if n < 1 {
		return fmt.Errorf("controller: %d partitions for %s; want at least 1", n, comp)
	}
	if rp, ok := c.cfg.Pool.(RescalePool); ok {
		if err := rp.CanRescale(); err != nil {
			return fmt.Errorf("controller: the rescale of %s is refused: %w", comp, err)
		}
	}
	c.layoutMu.Lock() // one read-modify-commit of the record at a time
	defer c.layoutMu.Unlock()
	c.mu.Lock()
	rec := c.recordLocked()
	rec.Targets[comp] = n
	cancel := n == rec.Counts[comp]
	if cancel {
		delete(rec.Targets, comp)
	}
	c.mu.Unlock()
	if err := c.commitRecord(ctx, rec); err != nil {
		return fmt.Errorf("controller: persist the rescale of %s to %d partitions: %w", comp, n, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.layout = rec
	if r := c.rescale; r != nil && r.comp == comp && !r.switching {
		r.to = n // a quiesce under way goes to the new count
		if cancel {
			c.rescale = nil
		}
	}
	return nil
}

// recordLocked returns a copy of the layout record to change: the stored
// one, or one made from the plan if none was stored. REQUIRES: c.mu held.
func (c *Controller) recordLocked() LayoutRecord {
	rec := c.layout.clone()
	if rec.Counts == nil {
		rec.Counts, rec.Spec = c.plan.Layout(), c.plan.Layout()
	}
	if rec.Targets == nil {
		rec.Targets = plan.Layout{}
	}
	return rec
}

// commitRecord writes the layout record in a commit of its own.
// REQUIRES: c.layoutMu held (each write is a read-modify-write).
func (c *Controller) commitRecord(ctx context.Context, rec LayoutRecord) error {
	txn := store.NewTxn()
	rec.Put(txn)
	return c.cfg.Store.Commit(ctx, txn)
}

// RescalePool is a Pool that can say its workers cannot take part in a
// rescale (cluster.Pool: a worker of an older protocol version).
type RescalePool interface {
	CanRescale() error
}

// Rescales returns the finished rescales, oldest first, and the one under
// way (nil if none).
func (c *Controller) Rescales() (done []RescaleReport, current *RescaleReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done = append(done, c.rescales...)
	if r := c.rescale; r != nil {
		current = &RescaleReport{Computation: r.comp, From: r.from, To: r.to, Began: r.began, Quiesced: r.quiesced}
	}
	return done, current
}

// quiescing reports whether comp's control says Quiesce. REQUIRES: c.mu held.
func (c *Controller) quiescing(comp string) bool {
	r := c.rescale
	return r != nil && !r.switching && r.comp == comp
}

// held reports whether p may not start a job because a rescale is
// switching its computation or one writing its inputs. REQUIRES: c.mu held.
func (c *Controller) held(p *partition) bool {
	r := c.rescale
	return r != nil && r.switching && c.affected(p.comp.Name)
}

// affected reports whether comp is the computation being rescaled or one
// that writes its inputs (whose jobs route by its layout). REQUIRES: c.mu
// held, c.rescale set.
func (c *Controller) affected(comp string) bool {
	r := c.rescale
	if comp == r.comp {
		return true
	}
	for _, u := range c.plan.Upstream(c.plan.Computations[r.comp]) {
		if u.Name == comp {
			return true
		}
	}
	return false
}

// decideRescale advances the rescale under way, or begins the next one
// asked for. Once the computation is quiesced it removes every job that
// routes by the old layout and sets eff.layout: apply commits the new
// layout after their leases' aborts returned. REQUIRES: c.mu held.
func (c *Controller) decideRescale(eff *effects, now time.Time) {
	r := c.rescale
	if r == nil {
		if c.state != Working || !c.laidOut || now.Before(c.rescaleRetryAt) {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(c.layout.Targets)) {
			comp := c.plan.Computations[name]
			if comp == nil || comp.Rescalable() != nil {
				c.cfg.Logf("controller: not rescaling %s: not a keyed Transform of this pipeline", name)
				delete(c.layout.Targets, name)
				continue
			}
			to, from := c.layout.Targets[name], comp.Partitions
			if c.complete[name] {
				continue
			}
			if to == from {
				delete(c.layout.Targets, name)
				continue
			}
			c.rescale = &rescaling{comp: name, from: from, to: to, began: now}
			c.cfg.Logf("controller: rescaling %s from %d to %d partitions: quiescing it", name, from, to)
			break
		}
		return
	}
	if !r.switching {
		if c.state != Working {
			c.cfg.Logf("controller: the pipeline is %s: the rescale of %s waits until it works again", c.state, r.comp)
			c.rescale = nil
			return
		}
		if !c.quiesced(r.comp) {
			if now.Sub(r.began) >= c.cfg.QuiesceTimeout {
				c.abandonQuiesce(r, now)
			}
			return
		}
		c.quiesceTimeouts = 0
		r.switching, r.quiesced = true, now
		c.cfg.Logf("controller: %s is quiesced; stopping it and the jobs writing its inputs", r.comp)
	}
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job != nil && c.affected(p.comp.Name) {
			c.removeJob(eff, p, nil, now)
		}
	}
	// Apply commits the layout once every removed job's lease is aborted
	// in this cycle (an abort that failed puts its job back: the next
	// cycle removes it again), then starts the new layout's jobs.
	eff.layout = &layoutSwitch{comp: r.comp, to: r.to}
}

// startsAfterSwitch chooses workers for the partitions a switch left
// without jobs — the rescaled computation's and its upstream ones' — so
// that they start in the apply that committed the layout instead of a
// cycle later. REQUIRES: c.mu not held.
func (c *Controller) startsAfterSwitch(now time.Time) []start {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != Working && c.state != Draining {
		return nil
	}
	var out []start
	load := c.jobLoads()
	for _, id := range c.order {
		p := c.partitions[id]
		if p.job == nil && !c.complete[p.comp.Name] && !now.Before(p.restartAt) {
			if w := c.chooseWorker(now, load); w != nil {
				load[w]++
				out = append(out, start{p: p, worker: w})
			}
		}
	}
	return out
}

// layoutSwitch is a rescale's commit of the new layout.
type layoutSwitch struct {
	comp string
	to   int
}

// switchLayout commits the new layout and lays out the computation's
// partitions anew. A failed commit leaves everything as it was; the next
// cycle commits again (the record is the same, so an earlier attempt whose
// outcome was unknown is resolved by the retry).
func (c *Controller) switchLayout(ctx context.Context, sw *layoutSwitch, now time.Time) error {
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	c.mu.Lock()
	if r := c.rescale; r == nil || r.comp != sw.comp || !r.switching {
		c.mu.Unlock()
		return fmt.Errorf("controller: internal: a layout switch of %s without its rescale", sw.comp)
	}
	var stopped []transport.PartitionID
	for _, id := range c.order {
		if c.affected(c.partitions[id].comp.Name) {
			stopped = append(stopped, id)
		}
	}
	c.mu.Unlock()
	if c.cfg.Hub != nil {
		// The stopped lives can no longer commit, but one still running
		// (a zombie) could offer what it read or reloaded, routed by the
		// old layout; landing in a partition of the new one ahead of its
		// successor's replay, it would advance that partition's frontier
		// past messages the replay brings next. Fence them all first.
		for _, id := range stopped {
			c.cfg.Hub.Fence(id)
		}
	}
	c.mu.Lock()
	rec := c.recordLocked()
	rec.Counts[sw.comp] = sw.to
	if t, ok := rec.Targets[sw.comp]; ok && t == sw.to {
		delete(rec.Targets, sw.comp) // else asked for again since: the next rescale
	}
	next, err := c.plan.WithLayout(plan.Layout{sw.comp: sw.to})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.commitRecord(ctx, rec); err != nil {
		return fmt.Errorf("controller: commit the layout of %s with %d partitions: %w", sw.comp, sw.to, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rescale
	c.layout = rec
	c.plan = next
	comp := next.Computations[sw.comp]
	last := map[transport.PartitionID]store.LeaseID{}
	keep := c.order[:0]
	for _, id := range c.order {
		p := c.partitions[id]
		if p.comp.Name != sw.comp {
			keep = append(keep, id)
			continue
		}
		last[id] = p.lastLease
		delete(c.partitions, id)
		delete(c.flog.pending, id) // its failures are summarized no more
		c.cfg.Board.Release(id)
		if c.cfg.Hub != nil {
			c.cfg.Hub.Drop(id) // routed by the old layout
		}
	}
	c.order = keep
	for i := 0; i < sw.to; i++ {
		lo, hi, toEnd := plan.PartitionRange(i, sw.to)
		id := plan.KeyedPartitionID(sw.comp, i)
		c.addPartition(comp, plan.PartitionSpec{ID: id, Index: i, Lo: lo, Hi: hi, ToEnd: toEnd})
		c.partitions[id].lastLease = last[id]
	}
	// Computations upstream keep their *CompPlan (WithLayout), so their
	// partitions need nothing; their next jobs get the new plan.
	r.switching = false
	c.rescale = nil
	c.pendingResume = append(c.pendingResume, RescaleReport{Computation: sw.comp, From: r.from, To: sw.to, Began: r.began, Quiesced: r.quiesced, Committed: now})
	c.cfg.Logf("controller: %s now has %d partitions (layout committed); starting its jobs", sw.comp, sw.to)
	return nil
}

// noteResumed completes the reports of switched rescales once every
// partition of the computation has a job that reported. REQUIRES: c.mu held.
func (c *Controller) noteResumed(now time.Time) {
	keep := c.pendingResume[:0]
	for _, rep := range c.pendingResume {
		comp, ok := c.plan.Computations[rep.Computation]
		if _, reported := c.compStatuses(comp); ok && reported {
			rep.Resumed = now
			c.rescales = append(c.rescales, rep)
			c.cfg.Logf("controller: the rescale of %s from %d to %d partitions is done; it took no input for %v", rep.Computation, rep.From, rep.To, rep.Pause())
			continue
		}
		keep = append(keep, rep)
	}
	c.pendingResume = keep
}

// SpecLayout returns the spec's partition counts (what a worker that does
// not know layouts runs).
func (c *Controller) SpecLayout() plan.Layout {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specLayoutLocked()
}

// specLayoutLocked is SpecLayout with c.mu held.
func (c *Controller) specLayoutLocked() plan.Layout {
	if c.layout.Spec != nil {
		return c.layout.Spec
	}
	return c.cfg.Plan.Layout()
}

// Rescaling reports whether a rescale is under way: quiescing, switching,
// or waiting for its new jobs' first reports. The distributed mode's pool
// heartbeats the workers more often meanwhile.
func (c *Controller) Rescaling() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rescale != nil || len(c.pendingResume) > 0
}

// quiesced reports whether every partition of comp has a job that reports
// Quiesced. REQUIRES: c.mu held.
func (c *Controller) quiesced(comp string) bool {
	sts, ok := c.compStatuses(c.plan.Computations[comp])
	if !ok {
		return false
	}
	for _, st := range sts {
		if !st.Quiesced {
			return false
		}
	}
	return true
}

// abandonQuiesce gives up a quiesce that did not finish within
// QuiesceTimeout — its outputs are not acknowledged downstream (a sink that
// cannot write, a receiver that does not run) or one of its partitions has
// no job —: the computation takes input again, and the rescale is tried
// again after a backoff (QuiesceTimeout doubling, at most 5 minutes) while
// its target stays. REQUIRES: c.mu held.
func (c *Controller) abandonQuiesce(r *rescaling, now time.Time) {
	c.quiesceTimeouts++
	backoff := c.cfg.QuiesceTimeout
	for i := 1; i < c.quiesceTimeouts && backoff < maxRescaleBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, maxRescaleBackoff)
	c.rescale, c.rescaleRetryAt = nil, now.Add(backoff)
	c.cfg.Warnf("the rescale of %s from %d to %d partitions waited %v for %s to deliver its outputs (it took no input meanwhile): "+
		"it takes input again, and the rescale is tried again in %v; if it keeps timing out, look at what %s's outputs wait for (a sink, a stopped receiver), "+
		"or cancel it by asking for %d partitions", r.comp, r.from, r.to, now.Sub(r.began).Round(time.Millisecond), r.comp, backoff, r.comp, r.from)
}

// maxRescaleBackoff caps the wait before a rescale whose quiesce timed out
// is tried again.
const maxRescaleBackoff = 5 * time.Minute

// resumeFences returns, for a partition of a computation whose rescale has
// switched and not resumed yet, the leases of its upstream partitions' jobs
// (plan.JobSpec.Fences); ok is false while one of them has no job — the
// partition then waits, as its new job could not fence that partition's
// stopped lives. REQUIRES: c.mu held.
func (c *Controller) resumeFences(p *partition) (fences map[transport.PartitionID]store.LeaseID, ok bool) {
	resuming := false
	for _, rep := range c.pendingResume {
		resuming = resuming || rep.Computation == p.comp.Name
	}
	if !resuming {
		return nil, true
	}
	fences = map[transport.PartitionID]store.LeaseID{}
	for _, u := range c.plan.Upstream(p.comp) {
		for _, id := range c.order {
			if q := c.partitions[id]; q.comp.Name == u.Name {
				if q.job == nil {
					return nil, false
				}
				fences[id] = q.job.lease
			}
		}
	}
	return fences, true
}

// Layout returns the partition counts the controller lays the keyed
// computations out on now (a rescale changes them).
func (c *Controller) Layout() plan.Layout {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plan.Layout()
}
