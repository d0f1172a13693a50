package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// Watermarks. A stream's SystemWatermark says "every message on the stream
// below it is processed"; its event watermark says how far event time has
// progressed. Both are computed from the reports of the CURRENT jobs of the
// stream's writer (the board keeps no other), as the minimum over the
// writer's partitions, and published to the readers in their controls.
//
// Published watermarks never go down, event or system: a restarted writer
// reloads its outbox and reports a lower system bound, a restarted source
// job reports no event time until it reads again, and a partition whose job
// has not reported yet is unknown. The controller keeps the highest value
// it published and persists it (flow_state, at most once per
// marksPersistPeriod and when Run returns), so that a process restart does
// not lower them either. Lowering a system watermark would be harmless, but
// lowering an event watermark stops downstream event-time timers until new
// data arrives.
//
// A completed computation (its finite sources read and everything
// processed) publishes for its output streams, as SystemWatermark, a store
// timestamp taken when it completed: every message it emitted is below it,
// and anything it emits in a later run (a finite source given more rows
// after a restart) is above — a Transform's outputs carry a later epoch
// timestamp. A Swift writer's outputs inherit their inputs' timestamps, so
// its mark is also capped by the bound its jobs reported for their future
// outputs. The event watermark of a completed computation is "end of input"
// (far future) while this process runs; it is not persisted, because a
// later run may emit again. The dedup floor GC persists is at most the
// published watermark, so it too stays below anything a later run sends.

// marksPersistPeriod bounds how often the published watermarks are written.
const marksPersistPeriod = time.Second

// dedupGCPeriod bounds how often dedup rows below the watermarks are
// deleted (tables.GCDedup). Each deletion is a range tombstone, and
// Pebble fragments all of a memtable's range tombstones again for the
// first read after each new one: one per stream every scheduler cycle
// (10 ms in the bench) filled a memtable that lives for minutes at a low
// rate with thousands of them, and every source read paid for them (16%
// of the CPU at 1,000 msg/s; docs/performance.md, issue 24, stop 35).
// Deleting later only keeps redundant rows a little longer.
const dedupGCPeriod = time.Second

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

const marksKey = "published_watermarks"

// marks holds what the controller published.
type marks struct {
	system map[string]store.Timestamp // stream → highest published SystemWatermark
	event  map[string]time.Time       // stream → highest published event watermark (completion excluded)
	done   map[string]store.Timestamp // stream → SystemWatermark of its completed writer
	gc     map[string]store.Timestamp // computation\x00stream → dedup floor
	// gcAt is when dedup GC was last decided (dedupGCPeriod).
	gcAt time.Time
	// saved is the encoding last persisted, savedAt when.
	saved   []byte
	savedAt time.Time
}

func newMarks() marks {
	return marks{system: map[string]store.Timestamp{}, event: map[string]time.Time{},
		done: map[string]store.Timestamp{}, gc: map[string]store.Timestamp{}}
}

// persistedMarks is the stored form of the published watermarks.
type persistedMarks struct {
	System map[string]uint64 `json:"system"`
	Event  map[string]int64  `json:"event"` // unix nanoseconds
}

func (m *marks) encode() []byte {
	p := persistedMarks{System: map[string]uint64{}, Event: map[string]int64{}}
	for s, w := range m.system {
		p.System[s] = uint64(w)
	}
	for s, t := range m.event {
		if !t.IsZero() {
			p.Event[s] = t.UnixNano()
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // maps of numbers always marshal
	}
	return b
}

// raiseToPublished raises the marks to what board already published: the
// controls of a controller that this one takes over from in the same
// process (the simulations' handover; controller/adopt.go). Those
// watermarks stay true — jobs may have relied on them — and a board's
// published watermarks never go down, as a worker raises a new leader's
// lower ones in the distributed mode (cluster/worker.go: raise). A
// computation's event watermark is the lowest of its inputs', so each
// input's is at least it; a completed upstream's far-future one is not
// carried (completion is found again, and never persisted).
func (m *marks) raiseToPublished(b *board.Board, pl *plan.Plan) {
	for _, name := range pl.Order() {
		ctl := b.Control(name)
		for s, wm := range ctl.InputSystemWM {
			m.system[s] = max(m.system[s], wm)
		}
		if ctl.UpstreamDone || !ctl.EventWM.Before(farFuture) {
			continue
		}
		for _, s := range pl.Computations[name].Inputs {
			if ctl.EventWM.After(m.event[s]) {
				m.event[s] = ctl.EventWM
			}
		}
	}
}

// load reads the dedup floors and the persisted watermarks.
func (m *marks) load(ctx context.Context, st store.Store, pl *plan.Plan) error {
	for _, name := range pl.Order() {
		for _, s := range pl.Computations[name].Inputs {
			w, err := tables.DedupFloor(ctx, st, name, s)
			if err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			m.gc[name+"\x00"+s] = w
		}
	}
	v, ok, err := st.Get(ctx, store.FlowState, []byte(marksKey))
	if err != nil {
		return fmt.Errorf("controller: read published watermarks: %w", err)
	}
	if !ok {
		return nil
	}
	var p persistedMarks
	if err := json.Unmarshal(v, &p); err != nil {
		return fmt.Errorf("controller: decode published watermarks: %w", err)
	}
	for s, w := range p.System {
		m.system[s] = max(m.system[s], store.Timestamp(w))
	}
	for s, ns := range p.Event {
		if t := time.Unix(0, ns).UTC(); t.After(m.event[s]) {
			m.event[s] = t
		}
	}
	m.saved = m.encode()
	return nil
}

// due returns the marks' encoding if they changed since they were last
// persisted and, unless force, marksPersistPeriod has passed (nil if not).
func (m *marks) due(now time.Time, force bool) []byte {
	if !force && now.Sub(m.savedAt) < marksPersistPeriod {
		return nil
	}
	b := m.encode()
	if bytes.Equal(b, m.saved) {
		return nil
	}
	return b
}

// persistMarks writes an encoding of the marks (from marks.due) and
// records it as saved.
func (c *Controller) persistMarks(ctx context.Context, b []byte, now time.Time) {
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(marksKey), b)
	if err := c.cfg.Store.Commit(ctx, txn); err != nil {
		c.cfg.Logf("controller: persist published watermarks: %v", err)
		return
	}
	c.mu.Lock()
	c.marks.saved, c.marks.savedAt = b, now
	c.mu.Unlock()
}

// ForgetWatermarks adds to txn the deletion of the persisted published
// watermarks. The engine does it when it accepts a static spec change of a
// stopped pipeline: the marks describe streams as the old spec wrote them
// (a stream's writer may now read another source, whose messages carry
// older timestamps), and a drained pipeline has nothing in flight that a
// lower mark could let through twice.
func ForgetWatermarks(txn *store.Txn) { txn.Delete(store.FlowState, []byte(marksKey)) }

// flushMarks persists the marks now if they changed.
func (c *Controller) flushMarks(ctx context.Context) {
	now := c.cfg.Store.Now()
	c.mu.Lock()
	b := c.marks.due(now, true)
	c.mu.Unlock()
	if b != nil {
		c.persistMarks(ctx, b, now)
	}
}

// updateCompletion marks computations complete, upstream first (iterating
// to a fixed point), and records their completion watermarks: ts, a store
// timestamp taken for this cycle. REQUIRES: c.mu held.
func (c *Controller) updateCompletion(ts store.Timestamp) {
	pl := c.plan
	for changed := true; changed; {
		changed = false
		for _, name := range pl.Order() {
			comp := pl.Computations[name]
			if c.complete[name] || !c.computationComplete(comp) {
				continue
			}
			for _, s := range comp.Outputs {
				mark := ts
				if comp.Swift() {
					if wm, _, known := c.writerMarks(comp, s); known && wm < mark {
						mark = wm
					}
				}
				c.marks.done[s] = mark
			}
			c.complete[name] = true
			changed = true
			c.cfg.Logf("controller: computation %s completed", name)
		}
	}
}

// computationComplete: a source computation's source has been listed,
// every upstream computation is complete and every partition's current job
// reports Drained (for keyed computations, with
// the upstream completion already seen). REQUIRES: c.mu held.
func (c *Controller) computationComplete(comp *plan.CompPlan) bool {
	if comp.IsSource() {
		if sl := c.sources[comp.Name]; sl == nil || !sl.listed {
			return false // its partitions are not known: never complete
		}
	} else {
		for _, u := range c.plan.Upstream(comp) {
			if !c.complete[u.Name] {
				return false
			}
		}
	}
	sts, ok := c.compStatuses(comp)
	if !ok {
		return false
	}
	for _, st := range sts {
		if !st.Drained || (!comp.IsSource() && !st.UpstreamDoneSeen) {
			return false
		}
	}
	return true
}

// currentStatus returns the latest status of p's current job (none while p
// has no job or its job has not reported). REQUIRES: c.mu held.
func (c *Controller) currentStatus(p *partition) (board.Status, bool) {
	if p.job == nil {
		return board.Status{}, false
	}
	st, ok := c.cfg.Board.Status(p.spec.ID)
	if !ok || st.Job != p.job.id {
		return board.Status{}, false
	}
	return st, true
}

// compStatuses returns the latest status of the current job of every
// partition of comp, in layout order; ok is false while some partition has
// none (no job, or a job that has not reported yet). REQUIRES: c.mu held.
func (c *Controller) compStatuses(comp *plan.CompPlan) (sts []board.Status, ok bool) {
	for _, id := range c.order {
		p := c.partitions[id]
		if p.comp != comp {
			continue
		}
		st, ok := c.currentStatus(p)
		if !ok {
			return nil, false
		}
		sts = append(sts, st)
	}
	return sts, true
}

// writerMarks computes stream s's watermarks from the reports of comp's
// current jobs: the minimum SystemWatermark bound, and the minimum event
// watermark over partitions that are not idle (the maximum over idle ones
// if all are). known is false while some partition has no report.
// REQUIRES: c.mu held.
func (c *Controller) writerMarks(comp *plan.CompPlan, s string) (wm store.Timestamp, ev time.Time, known bool) {
	sts, ok := c.compStatuses(comp)
	if !ok || len(sts) == 0 {
		return 0, time.Time{}, false
	}
	anyActive := false
	var idleMax time.Time
	for i, st := range sts {
		if w := st.SystemWM[s]; i == 0 || w < wm {
			wm = w
		}
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
	if !anyActive {
		ev = idleMax
	}
	return wm, ev, true
}

// publishControls computes stream watermarks, publishes each computation's
// control, garbage-collects dedup rows below the watermarks every reader
// applied (eff.gc), and persists the published marks when due (eff.marks).
// REQUIRES: c.mu held.
func (c *Controller) publishControls(eff *effects, now time.Time) {
	pl := c.plan
	sysWM := map[string]store.Timestamp{}
	eventWM := map[string]time.Time{}
	for _, name := range pl.Order() {
		comp := pl.Computations[name]
		for _, s := range comp.Outputs {
			if c.complete[name] {
				sysWM[s] = max(c.marks.done[s], c.marks.system[s])
				c.marks.system[s] = sysWM[s]
				eventWM[s] = farFuture
				continue
			}
			wm, ev, known := c.writerMarks(comp, s)
			if known {
				c.marks.system[s] = max(c.marks.system[s], wm)
				if ev.After(c.marks.event[s]) {
					c.marks.event[s] = ev
				}
			}
			sysWM[s], eventWM[s] = c.marks.system[s], c.marks.event[s]
		}
	}
	gcDue := now.Sub(c.marks.gcAt) >= dedupGCPeriod // dedup GC at most once per period
	for _, name := range pl.Order() {
		comp := pl.Computations[name]
		ctl := board.Control{InputSystemWM: map[string]store.Timestamp{}, Draining: c.drainingControl(), Quiesce: c.quiescing(name)}
		up := true
		for _, u := range pl.Upstream(comp) {
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
		if !gcDue {
			continue
		}
		for _, s := range comp.Inputs {
			key := name + "\x00" + s
			wm := c.appliedWatermark(comp, s)
			if wm > c.marks.gc[key] && wm != 0 {
				eff.gc = append(eff.gc, dedupGC{comp: name, stream: s, wm: wm})
			}
		}
	}
	if len(eff.gc) > 0 {
		c.marks.gcAt = now
	}
	eff.marks = c.marks.due(now, false)
}

// appliedWatermark is the lowest input SystemWatermark of stream s that
// every partition of comp reports to use (0 if any partition's current job
// has not reported): dedup rows below it are safe to delete. REQUIRES: c.mu
// held.
func (c *Controller) appliedWatermark(comp *plan.CompPlan, s string) store.Timestamp {
	sts, ok := c.compStatuses(comp)
	if !ok || len(sts) == 0 {
		return 0
	}
	wm := sts[0].AppliedInputWM[s]
	for _, st := range sts[1:] {
		wm = min(wm, st.AppliedInputWM[s])
	}
	return wm
}

// drainingControl says whether jobs must only drain — not read their
// sources, not fire timers. It stays set once the pipeline is stopped or
// completed: a cycle decides the state and publishes the controls before
// its apply aborts the leases, and a job running an epoch in between would
// otherwise read its source again and commit new outputs into an outbox the
// drain check already saw empty ("stopped" and "completed" must mean
// drained: a static spec change is accepted then, and would orphan them).
// REQUIRES: c.mu held.
func (c *Controller) drainingControl() bool {
	switch c.state {
	case Draining, Stopped, Completed:
		return true
	}
	return false
}
