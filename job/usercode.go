package job

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
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
	// readErr is the first failure to read state or external state: weir's
	// or the store's, never a reason to dead-letter the message.
	readErr error
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
func (c *callContext) setReadErr(err error) {
	c.setErr(err)
	if c.readErr == nil {
		c.readErr = err
	}
}
func (c *callContext) LoadState(name string, decode func([]byte) (any, error)) (any, error) {
	if err := c.stateAllowed(name); err != nil {
		return nil, err
	}
	v, err := c.job.states.load(c.ctx, c.key, name, decode)
	if err != nil {
		c.setReadErr(err)
	}
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
	if err != nil {
		c.setReadErr(err)
	}
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
	if err != nil {
		c.setReadErr(err)
	}
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

// collector implements weir.Output for one call. A job reuses one
// collector for every call (weir.Output is valid only during the call):
// outputs are appended to the epoch's shared emitted buffer.
type collector struct {
	job      *Job
	key      weir.Key
	defaults []*weir.Message
	timer    *weir.Timer
	// allowed is built only when a call with many messages names parents
	// (AddWithParents); a short call's parents are checked by a scan.
	allowed map[*weir.Message]bool
	out     *[]emitted
	// err is the first output the collector refused: the call fails with
	// it even if the code ignored the error (runUser).
	err error
}

// reset prepares the collector for one call.
func (c *collector) reset(key weir.Key, defaults []*weir.Message, timer *weir.Timer) {
	c.key, c.defaults, c.timer, c.err = key, defaults, timer, nil
	if c.allowed != nil {
		clear(c.allowed)
		c.allowed = nil
	}
}

// scanLimit is the call size up to which a parent is looked up by a scan of
// the call's messages rather than in a set.
const scanLimit = 16

// isInput reports whether p is a message of the current call.
func (c *collector) isInput(p *weir.Message) bool {
	if len(c.defaults) <= scanLimit {
		for _, m := range c.defaults {
			if m == p {
				return true
			}
		}
		return false
	}
	if c.allowed == nil {
		c.allowed = make(map[*weir.Message]bool, len(c.defaults))
		for _, m := range c.defaults {
			c.allowed[m] = true
		}
	}
	return c.allowed[p]
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
		if !c.isInput(p) {
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
	// One representation per value before the row is hashed, stored or
	// sent (codec.Canonical says why); a value rows cannot hold, or a row
	// a receiver cannot route, fails this call — naming its input — not
	// the epoch's commit.
	row, err := codec.Canonical(row)
	if err != nil {
		return c.refuse(fmt.Errorf("weir: output on %s: %w", stream, err))
	}
	for _, r := range c.job.routes[stream] {
		if err := r.CheckGroupBy(row); err != nil {
			return c.refuse(fmt.Errorf("weir: output on %s cannot be routed to %s: %w", stream, r.Name, err))
		}
	}
	*c.out = append(*c.out, emitted{stream: stream, row: row, parents: parents, timer: c.timer, key: c.key})
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
	*c.out = append(*c.out, emitted{stream: stream, isTimer: true, req: req, key: c.key, parents: c.defaults, timer: c.timer})
	return nil
}

func (c *collector) Streams() []string { return c.job.comp.Outputs }

// callScratch holds what process reuses from epoch to epoch: the messages
// sorted into key order, the emitted buffer, and the one Context and
// Output every call gets (both are valid only during their call). What it
// hands out (the emitted outputs and their parent slices) is used by the
// rest of Decide and dropped before the next epoch's process.
type callScratch struct {
	sorted []*weir.Message
	timers []*timerEntry
	out    []emitted
	cc     callContext
	col    collector
	undo   callUndo
}

// compareKeys orders keys as process calls them: by hash, then encoding.
func compareKeys(a, b weir.Key) int {
	if c := cmp.Compare(a.Hash, b.Hash); c != 0 {
		return c
	}
	return strings.Compare(a.Encoded, b.Encoded)
}

// compareInKey orders one key's messages as user code sees them: by
// AlignmentTimestamp, then id (ids are unique among an epoch's fresh
// inputs, so the order is total).
func compareInKey(x, y *weir.Message) int {
	if c := cmp.Compare(x.AlignmentTimestamp, y.AlignmentTimestamp); c != 0 {
		return c
	}
	return strings.Compare(string(x.ID), string(y.ID))
}

// process runs user code for every key with fired timers or fresh
// messages, in key order (hash, then encoding), each key's timers first
// (in firing order), then its messages by (AlignmentTimestamp, id); each
// call goes through runUser (recover.go), which turns its failure into a
// *UserCodeError naming the input.
//
// It works on the batch, not per message: one sort puts the messages in
// call order, each key's messages are a sub-slice of it (no group map, no
// per-message slices), and every call shares one Context, one Output and
// one emitted buffer.
func (j *Job) process(ctx context.Context, ts store.Timestamp, msgs []*weir.Message, fired []*timerEntry) ([]emitted, error) {
	sc := &j.calls
	clear(sc.sorted)
	clear(sc.timers)
	clear(sc.out)
	sc.sorted = append(sc.sorted[:0], msgs...)
	slices.SortFunc(sc.sorted, func(x, y *weir.Message) int {
		if c := compareKeys(x.Key, y.Key); c != 0 {
			return c
		}
		return compareInKey(x, y)
	})
	sc.timers = append(sc.timers[:0], fired...)
	slices.SortStableFunc(sc.timers, func(x, y *timerEntry) int { return compareKeys(x.key, y.key) })
	sc.out = sc.out[:0]
	code := j.comp.Code
	cc, col := &sc.cc, &sc.col
	col.job, col.out = j, &sc.out
	if len(j.skips) > 0 {
		sc.sorted = j.dropSkipped(sc.sorted) // may emit dead letters into sc.out
	}
	ms, ts0 := sc.sorted, sc.timers
	for len(ms) > 0 || len(ts0) > 0 {
		// The next key: the smaller of the next timer's and message's.
		var key weir.Key
		switch {
		case len(ts0) == 0:
			key = ms[0].Key
		case len(ms) == 0:
			key = ts0[0].key
		case compareKeys(ts0[0].key, ms[0].Key) <= 0:
			key = ts0[0].key
		default:
			key = ms[0].Key
		}
		nt := 0
		for nt < len(ts0) && compareKeys(ts0[nt].key, key) == 0 {
			nt++
		}
		nm := 0
		for nm < len(ms) && compareKeys(ms[nm].Key, key) == 0 {
			nm++
		}
		timers, group := ts0[:nt:nt], ms[:nm:nm]
		ts0, ms = ts0[nt:], ms[nm:]
		*cc = callContext{ctx: ctx, job: j, key: key, now: ts, eventWM: j.eventWM}
		for _, t := range timers {
			col.reset(key, nil, &t.t)
			if err := j.runUser(userCall{timer: &t.t}, col, func() error { return code.OnTimer(cc, &t.t, col) }); err != nil {
				return nil, err
			}
		}
		if len(group) > 0 && code.OnMessages != nil {
			col.reset(key, group, nil)
			if err := j.runMessages(cc, col, key, group, func() error { return code.OnMessages(cc, group, col) }); err != nil {
				return nil, err
			}
		} else if len(group) > 0 {
			for i, m := range group {
				one := group[i : i+1 : i+1]
				col.reset(key, one, nil)
				if err := j.runMessages(cc, col, key, one, func() error { return code.OnMessage(cc, m, col) }); err != nil {
					return nil, err
				}
			}
		}
		if cc.err != nil {
			return nil, cc.err
		}
	}
	return sc.out, nil
}

// idCounter names a sequence of output indexes within one epoch: per
// stream for Transform outputs and timers, per (parent id, stream) for
// Swift outputs.
type idCounter struct {
	base   msgid.ID
	stream string
	timer  bool
}

// materialize assigns ids and meta to emitted outputs and registers timers.
// Transform outputs get ordered ids from the epoch timestamp; SwiftMap
// outputs inherit their parent's id (or a merged id of several parents).
//
// The epoch's output messages are allocated together, and their ids are
// built in one buffer that becomes one string: two allocations for the
// batch instead of two per output. (An output kept in the outbox keeps its
// epoch's block alive; that is bounded by the epoch's size.)
func (j *Job) materialize(ts store.Timestamp, emits []emitted) ([]*weir.Message, [][]*weir.Message, error) {
	if j.idIndex == nil {
		j.idIndex = map[idCounter]uint64{}
	}
	index := j.idIndex
	clear(index)
	n := 0
	for _, e := range emits {
		if !e.isTimer {
			n++
		}
	}
	slab := make([]weir.Message, n)
	outs := make([]*weir.Message, 0, n)
	lineage := make([][]*weir.Message, 0, n)
	buf := j.idBuf[:0]
	ends := j.idEnds[:0]
	for _, e := range emits {
		if e.isTimer {
			ev := e.req.EventTimestamp
			if ev.IsZero() {
				ev = e.req.Trigger
			}
			c := idCounter{stream: e.stream, timer: true}
			id := msgid.Ordered(uint64(ts), e.stream, index[c])
			index[c]++
			if err := j.timers.add(&timerEntry{key: e.key, t: weir.Timer{
				ID: id, Stream: e.stream, Key: e.key, TriggerTimestamp: e.req.Trigger,
				EventTimestamp: ev, SystemTimestamp: ts,
			}}); err != nil {
				return nil, nil, err
			}
			continue
		}
		m := &slab[len(outs)]
		m.Stream, m.Payload = e.stream, e.row
		if j.comp.Swift() {
			var err error
			if buf, err = inheritMeta(buf, m, e.parents, index); err != nil {
				return nil, nil, fmt.Errorf("computation %s: %w", j.comp.Name, err)
			}
		} else {
			c := idCounter{stream: e.stream}
			buf = msgid.AppendOrdered(buf, uint64(ts), e.stream, index[c])
			index[c]++
			m.SystemTimestamp, m.AlignmentTimestamp = ts, ts
			m.EventTimestamp = minEventTime(e.parents)
			if e.timer != nil && m.EventTimestamp.IsZero() {
				m.EventTimestamp = e.timer.EventTimestamp
			}
		}
		ends = append(ends, len(buf))
		outs = append(outs, m)
		lineage = append(lineage, e.parents)
	}
	all := string(buf)
	from := 0
	for i, m := range outs {
		m.ID = msgid.ID(all[from:ends[i]])
		from = ends[i]
	}
	j.idBuf, j.idEnds = buf[:0], ends[:0]
	return outs, lineage, nil
}

// sortByID orders a Swift source's outputs (and their lineage, index-aligned)
// by id, which is their records' order: user code sees a source's messages
// by (AlignmentTimestamp, id), and write times need not follow offsets, but
// its channels are ordered (orderedSender) only if it offers every epoch's
// outputs in id order. The same holds per origin for a Swift computation
// that tags its outputs' origins (tagsOrigins): it sees its inputs grouped
// by key.
func sortByID(outs []*weir.Message, lineage [][]*weir.Message) {
	if slices.IsSortedFunc(outs, func(x, y *weir.Message) int { return strings.Compare(string(x.ID), string(y.ID)) }) {
		return
	}
	perm := make([]int, len(outs))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return strings.Compare(string(outs[a].ID), string(outs[b].ID)) })
	o := slices.Clone(outs)
	l := slices.Clone(lineage)
	for i, p := range perm {
		outs[i], lineage[i] = o[p], l[p]
	}
}

// inheritMeta gives a Swift output its deterministic id (appended to buf)
// and timestamps.
func inheritMeta(buf []byte, m *weir.Message, parents []*weir.Message, index map[idCounter]uint64) ([]byte, error) {
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
			return buf, err
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
	c := idCounter{base: base, stream: m.Stream}
	buf = msgid.AppendInherited(buf, base, m.Stream, index[c])
	index[c]++
	return buf, nil
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
