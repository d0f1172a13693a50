package controller

import (
	"time"

	"github.com/weir-stream/weir/store"
)

// advanceState moves the pipeline state machine one step toward the target
// (Flow's pipeline states, flow-internals §10.1):
//
//   - working: jobs run.
//   - draining → stopped: jobs run, but sources stop fetching and timers stop
//     firing; everything already read from the sources and every
//     intermediate message is processed and every outbox delivered. Stopped
//     is reached only when every partition's CURRENT job reported, in a
//     report made while draining, that nothing of it is in flight — twice,
//     in two cycles with no epoch of work between them (drainCheck) — and
//     then every job stops. Stopped therefore means drained: the static spec
//     may change.
//   - pausing → paused: every job is stopped at once (leases aborted);
//     intermediate data stays for the next start. Paused is reached once
//     every removed job has exited (or stayed stuck past the lost-job
//     timeout).
//   - completed: every computation completed (all sources finite and
//     processed). Final.
//
// A stop requested while pausing or paused runs the jobs again, draining:
// paused pipelines hold undelivered outboxes and unprocessed inputs, and
// "stopped" must mean drained. A changed (or never persisted) state is
// persisted in apply (eff.state). REQUIRES: c.mu held.
func (c *Controller) advanceState(eff *effects, now time.Time) {
	prev := c.state
	switch {
	case c.state == Completed:
	case len(c.complete) == len(c.plan.Computations) && (c.state == Working || c.state == Draining):
		c.state = Completed
	case c.target == Working:
		c.state = Working
	case c.target == Stopped:
		switch c.state {
		case Working, Pausing, Paused:
			c.state = Draining
		case Draining:
			if c.drain.step(c.quietNow(), c.workEpochs()) {
				c.state = Stopped
			}
		}
	case c.target == Paused:
		switch c.state {
		case Working, Draining, Stopped:
			c.state = Pausing // this cycle removes every job
		case Pausing:
			if c.allExited(now) {
				c.state = Paused
			}
		}
	}
	if c.state != prev {
		c.cfg.Logf("controller: pipeline %s → %s", prev, c.state)
		c.drain = drainCheck{}
	}
	if c.state != prev || !c.statePersisted {
		s := c.state
		eff.state = &s
	}
}

func putState(s State) *store.Txn {
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(stateKey), []byte(s))
	return txn
}

// quietNow: every partition of a computation not yet complete has a job
// whose own latest report, made while draining, says nothing of it is in
// flight (no buffered or unacknowledged input, no undelivered output;
// timers may remain). A partition without a job (removed, waiting for its
// restart backoff) is not quiet: it must run to drain, and neither is a
// source computation whose source was never listed (its partitions are not
// known). REQUIRES: c.mu held.
func (c *Controller) quietNow() bool {
	if !c.sourcesListed() {
		return false
	}
	for _, id := range c.order {
		p := c.partitions[id]
		if c.complete[p.comp.Name] {
			continue
		}
		if p.job == nil {
			return false
		}
		st, ok := c.cfg.Board.Status(id)
		if !ok || st.Job != p.job.id || !st.Quiet || !st.DrainingSeen {
			return false
		}
	}
	return true
}

// workEpochs is the number of epochs with work every job has run so far.
func (c *Controller) workEpochs() uint64 {
	var n uint64
	for _, v := range c.cfg.Board.Counters() {
		n += v.Epochs
	}
	return n
}

// drainCheck confirms a quiet pipeline over two cycles. One snapshot of the
// latest reports is not a consistent cut: a receiver acknowledges its
// inputs right after its commit and reports its new outbox a moment later,
// so the sender may already report quiet while the receiver's latest report
// still predates the delivery. A second quiet snapshot with no epoch of
// work run in between leaves no such window open.
type drainCheck struct {
	seen   bool
	epochs uint64
}

// step records one snapshot and reports whether the pipeline is drained.
func (d *drainCheck) step(quiet bool, epochs uint64) bool {
	if !quiet {
		*d = drainCheck{}
		return false
	}
	drained := d.seen && d.epochs == epochs
	d.seen, d.epochs = true, epochs
	return drained
}
