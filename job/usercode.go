package job

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/userstate"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// callContext implements weir.Context for one user-code call.
type callContext struct {
	ctx     context.Context
	job     *Job
	key     weir.Key
	now     store.Timestamp
	eventWM time.Time
	err     error // first state error, reported after the call
}

func (c *callContext) Context() context.Context  { return c.ctx }
func (c *callContext) Key() weir.Key             { return c.key }
func (c *callContext) Now() store.Timestamp      { return c.now }
func (c *callContext) EventWatermark() time.Time { return c.eventWM }
func (c *callContext) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}
func (c *callContext) LoadState(name string, decode func([]byte) (any, error)) (any, error) {
	if err := c.stateAllowed(name); err != nil {
		return nil, err
	}
	v, err := c.job.states.load(c.ctx, c.key, name, decode)
	c.setErr(err)
	return v, err
}
func (c *callContext) StoreState(name string, v any, empty bool, encode func(any) ([]byte, error)) {
	if c.stateAllowed(name) != nil {
		return
	}
	c.job.states.store(c.key, name, v, empty, encode)
}

// ExternalGet, ExternalPut, ExternalDelete and ExternalScan reach the
// epoch's external state buffer (extstate.go); an error fails the call
// even if the code ignores it.
func (c *callContext) ExternalGet(table string, key []any) (map[string]any, bool, error) {
	row, ok, err := c.job.ext.get(c.ctx, table, key)
	c.setErr(err)
	return row, ok, err
}
func (c *callContext) ExternalPut(table string, row map[string]any) error {
	err := c.job.ext.put(table, row)
	c.setErr(err)
	return err
}
func (c *callContext) ExternalDelete(table string, key []any) error {
	err := c.job.ext.delete(table, key)
	c.setErr(err)
	return err
}
func (c *callContext) ExternalScan(table string, lo, hi []any, fn func(row map[string]any) bool) error {
	err := c.job.ext.scan(c.ctx, table, lo, hi, fn)
	c.setErr(err)
	return err
}

// stateAllowed refuses state in Swift computations. A Swift computation's
// inputs are deduplicated only by the SystemWatermark, not by message id: an
// input processed and committed, whose acknowledgement was then lost (a
// crash after the commit), is delivered and processed again — its outputs
// are recomputed with the same ids and deduplicated downstream, but a state
// update would be applied twice. Stateful code belongs in a Transform.
func (c *callContext) stateAllowed(name string) error {
	if !c.job.comp.Swift() {
		return nil
	}
	err := fmt.Errorf("weir: computation %s is a SwiftMap and may not use state (%q): a redelivered input would update it twice; use a Transform for stateful code", c.job.comp.Name, name)
	c.setErr(err)
	return err
}

// emitted is an output or timer requested by user code, before the engine
// assigns its id and meta.
type emitted struct {
	stream  string
	row     weir.Row
	parents []*weir.Message
	timer   *weir.Timer // parent timer, when the call processes a timer
	key     weir.Key
	// timer requests
	isTimer bool
	req     weir.TimerRequest
}

// collector implements weir.Output for one call.
type collector struct {
	job      *Job
	key      weir.Key
	defaults []*weir.Message
	timer    *weir.Timer
	allowed  map[*weir.Message]bool
	out      []emitted
	// err is the first output the collector refused: the call fails with
	// it even if the code ignored the error (runUser).
	err error
}

// refuse records the first refused output and returns err.
func (c *collector) refuse(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

func (c *collector) Add(stream string, row weir.Row) error {
	return c.add(stream, row, c.defaults)
}

func (c *collector) AddWithParents(stream string, row weir.Row, parents ...*weir.Message) error {
	for _, p := range parents {
		if !c.allowed[p] {
			return c.refuse(fmt.Errorf("weir: output on %s names a parent that is not a message of the current call", stream))
		}
	}
	return c.add(stream, row, parents)
}

func (c *collector) add(stream string, row weir.Row, parents []*weir.Message) error {
	if !c.job.outputs[stream] {
		return c.refuse(fmt.Errorf("weir: computation %s has no output stream %q (output_stream_ids: %v)", c.job.comp.Name, stream, c.job.comp.Outputs))
	}
	if c.job.comp.Swift() {
		if c.timer != nil {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: outputs may not depend on timers", c.job.comp.Name))
		}
		if len(parents) == 0 {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: output on %s has no parent message", c.job.comp.Name, stream))
		}
		if len(parents) > 1 && !c.job.comp.AllowBatching {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: output message has %d parents; merging requires allow_batching_with_relaxed_guarantees=true", c.job.comp.Name, len(parents)))
		}
	}
	c.out = append(c.out, emitted{stream: stream, row: row, parents: parents, timer: c.timer, key: c.key})
	return nil
}

func (c *collector) AddTimer(stream string, req weir.TimerRequest) error {
	if _, ok := c.job.comp.Timers[stream]; !ok {
		return c.refuse(fmt.Errorf("weir: computation %s has no timer stream %q", c.job.comp.Name, stream))
	}
	if c.job.comp.IsSource() {
		return c.refuse(fmt.Errorf("weir: computation %s reads a source and cannot use timers", c.job.comp.Name))
	}
	if req.Trigger.IsZero() {
		return c.refuse(fmt.Errorf("weir: timer on %s has no trigger time", stream))
	}
	c.out = append(c.out, emitted{stream: stream, isTimer: true, req: req, key: c.key, parents: c.defaults, timer: c.timer})
	return nil
}

func (c *collector) Streams() []string { return c.job.comp.Outputs }

// group is the work of one key in one epoch.
type group struct {
	key    weir.Key
	timers []*timerEntry
	msgs   []*weir.Message
}

// process runs user code for every key with fired timers or fresh
// messages; each call goes through runUser (recover.go), which turns its
// failure into a *UserCodeError naming the input.
func (j *Job) process(ctx context.Context, ts store.Timestamp, msgs []*weir.Message, fired []*timerEntry) ([]emitted, error) {
	groups := map[string]*group{}
	get := func(k weir.Key) *group {
		g, ok := groups[k.Encoded]
		if !ok {
			g = &group{key: k}
			groups[k.Encoded] = g
		}
		return g
	}
	for _, t := range fired {
		g := get(t.key)
		g.timers = append(g.timers, t)
	}
	for _, m := range msgs {
		g := get(m.Key)
		g.msgs = append(g.msgs, m)
	}
	order := make([]*group, 0, len(groups))
	for _, g := range groups {
		order = append(order, g)
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].key.Hash != order[b].key.Hash {
			return order[a].key.Hash < order[b].key.Hash
		}
		return order[a].key.Encoded < order[b].key.Encoded
	})
	var out []emitted
	code := j.comp.Code
	for _, g := range order {
		cc := &callContext{ctx: ctx, job: j, key: g.key, now: ts, eventWM: j.eventWM}
		for _, t := range g.timers {
			col := &collector{job: j, key: g.key, timer: &t.t}
			if err := j.runUser(userCall{timer: &t.t}, col, func() error { return code.OnTimer(cc, &t.t, col) }); err != nil {
				return nil, err
			}
			out = append(out, col.out...)
		}
		if cc.err != nil {
			return nil, cc.err
		}
		if len(g.msgs) == 0 {
			continue
		}
		sort.SliceStable(g.msgs, func(a, b int) bool {
			x, y := g.msgs[a], g.msgs[b]
			if x.AlignmentTimestamp != y.AlignmentTimestamp {
				return x.AlignmentTimestamp < y.AlignmentTimestamp
			}
			return x.ID < y.ID
		})
		if code.OnMessages != nil {
			col := &collector{job: j, key: g.key, defaults: g.msgs, allowed: allowedSet(g.msgs)}
			if err := j.runUser(userCall{msgs: g.msgs}, col, func() error { return code.OnMessages(cc, g.msgs, col) }); err != nil {
				return nil, err
			}
			out = append(out, col.out...)
		} else {
			for _, m := range g.msgs {
				one := []*weir.Message{m}
				col := &collector{job: j, key: g.key, defaults: one, allowed: allowedSet(one)}
				if err := j.runUser(userCall{msgs: one}, col, func() error { return code.OnMessage(cc, m, col) }); err != nil {
					return nil, err
				}
				out = append(out, col.out...)
			}
		}
		if cc.err != nil {
			return nil, cc.err
		}
	}
	return out, nil
}

func allowedSet(msgs []*weir.Message) map[*weir.Message]bool {
	s := make(map[*weir.Message]bool, len(msgs))
	for _, m := range msgs {
		s[m] = true
	}
	return s
}

// materialize assigns ids and meta to emitted outputs and registers timers.
// Transform outputs get ordered ids from the epoch timestamp; SwiftMap
// outputs inherit their parent's id (or a merged id of several parents).
func (j *Job) materialize(ts store.Timestamp, emits []emitted) ([]*weir.Message, [][]*weir.Message, error) {
	var outs []*weir.Message
	var lineage [][]*weir.Message
	index := map[string]uint64{}
	for _, e := range emits {
		if e.isTimer {
			ev := e.req.EventTimestamp
			if ev.IsZero() {
				ev = e.req.Trigger
			}
			n := index["\x00timer\x00"+e.stream]
			index["\x00timer\x00"+e.stream]++
			id := msgid.Ordered(uint64(ts), e.stream, n)
			if err := j.timers.add(&timerEntry{key: e.key, t: weir.Timer{
				ID: id, Stream: e.stream, Key: e.key, TriggerTimestamp: e.req.Trigger,
				EventTimestamp: ev, SystemTimestamp: ts,
			}}); err != nil {
				return nil, nil, err
			}
			continue
		}
		m := &weir.Message{Stream: e.stream, Payload: e.row}
		if j.comp.Swift() {
			if err := inheritMeta(m, e.parents, index); err != nil {
				return nil, nil, fmt.Errorf("computation %s: %w", j.comp.Name, err)
			}
		} else {
			n := index[e.stream]
			index[e.stream]++
			m.ID = msgid.Ordered(uint64(ts), e.stream, n)
			m.SystemTimestamp, m.AlignmentTimestamp = ts, ts
			m.EventTimestamp = minEventTime(e.parents)
			if e.timer != nil && m.EventTimestamp.IsZero() {
				m.EventTimestamp = e.timer.EventTimestamp
			}
		}
		outs = append(outs, m)
		lineage = append(lineage, e.parents)
	}
	return outs, lineage, nil
}

// inheritMeta gives a Swift output its deterministic id and timestamps.
func inheritMeta(m *weir.Message, parents []*weir.Message, index map[string]uint64) error {
	var base msgid.ID
	if len(parents) == 1 {
		p := parents[0]
		base = p.ID
		m.SystemTimestamp, m.AlignmentTimestamp, m.EventTimestamp = p.SystemTimestamp, p.AlignmentTimestamp, p.EventTimestamp
	} else {
		pids := make([]msgid.ID, len(parents))
		for i, p := range parents {
			pids[i] = p.ID
		}
		var err error
		if base, err = msgid.Merged(pids); err != nil {
			return err
		}
		// SystemTimestamp = max over parents, so the receiver's watermark
		// filter never drops the merged message; the others are the minimum.
		m.SystemTimestamp, m.AlignmentTimestamp = parents[0].SystemTimestamp, parents[0].AlignmentTimestamp
		m.EventTimestamp = minEventTime(parents)
		for _, p := range parents[1:] {
			m.SystemTimestamp = max(m.SystemTimestamp, p.SystemTimestamp)
			m.AlignmentTimestamp = min(m.AlignmentTimestamp, p.AlignmentTimestamp)
		}
	}
	k := string(base) + "\x00" + m.Stream
	n := index[k]
	index[k]++
	m.ID = msgid.Inherited(base, m.Stream, n)
	return nil
}

func minEventTime(msgs []*weir.Message) time.Time {
	var t time.Time
	for _, m := range msgs {
		if !m.EventTimestamp.IsZero() && (t.IsZero() || m.EventTimestamp.Before(t)) {
			t = m.EventTimestamp
		}
	}
	return t
}

var (
	_ weir.Context           = (*callContext)(nil)
	_ userstate.Host         = (*callContext)(nil)
	_ userstate.ExternalHost = (*callContext)(nil)
	_ weir.Output            = (*collector)(nil)
)
