package job

import (
	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// swiftTracker implements Swift delivery accounting: nothing is
// materialized, so an input may be acknowledged upstream (or, at a source,
// its offset persisted) only when every output derived from it has been
// delivered to every destination. Until then the upstream sender keeps it,
// and a restart recomputes the same outputs with the same ids.
type swiftTracker struct {
	parents  map[msgid.ID]*swiftParent
	children map[msgid.ID]*swiftChild
	// ready holds parents whose children are all delivered; they are
	// acknowledged after the epoch's commit.
	ready []*swiftParent
	// pendingTS tracks the SystemTimestamps of undelivered children.
	pendingTS streamMins
	// bytes is the estimated size of the inputs held (not yet acknowledged).
	bytes int
}

type swiftParent struct {
	msg       *weir.Message
	size      int
	remaining int
	acked     bool
	// offset is the source offset of a source record (fromSource).
	offset     connector.Offset
	fromSource bool
}

// swiftChild is an output and the parents it waits for; most outputs have
// one parent (p0), merged ones more.
type swiftChild struct {
	msg       *weir.Message
	p0        *swiftParent
	more      []*swiftParent
	remaining int
	// acked holds the downstream destinations (route indexes) that
	// acknowledged it: each counts once.
	acked ackSet
}

func newSwiftTracker() *swiftTracker {
	return &swiftTracker{parents: map[msgid.ID]*swiftParent{}, children: map[msgid.ID]*swiftChild{}, pendingTS: streamMins{}}
}

// addSourceRecords registers a source batch's messages as parents with
// their offsets (the source reader marks them done by offset), in one
// block.
func (t *swiftTracker) addSourceRecords(msgs []*weir.Message, offsets []connector.Offset) {
	block := make([]swiftParent, len(msgs))
	for i, m := range msgs {
		_, held := t.parents[m.ID]
		// A source reads each offset once per life (its position only
		// moves forward), and a new life has a new tracker.
		invariants.Check(!held, "swift source record %s read twice", m.ID)
		p := &block[i]
		*p = swiftParent{msg: m, size: tables.MessageSize(m), offset: offsets[i], fromSource: true}
		t.parents[m.ID] = p
		t.bytes += p.size
	}
}

// track records the lineage of an epoch: inputs and each output's parents.
// Parents and children are allocated in one block each per epoch.
func (t *swiftTracker) track(inputs []*weir.Message, outs []*weir.Message, lineage [][]*weir.Message) {
	var block []swiftParent
	for _, m := range inputs {
		if _, ok := t.parents[m.ID]; !ok {
			if block == nil {
				block = make([]swiftParent, 0, len(inputs))
			}
			block = append(block, swiftParent{msg: m, size: tables.MessageSize(m)})
			p := &block[len(block)-1]
			t.parents[m.ID] = p
			t.bytes += p.size
		}
	}
	children := make([]swiftChild, len(outs))
	for i, m := range outs {
		c := &children[i]
		c.msg = m
		for _, p := range lineage[i] {
			sp := t.parents[p.ID]
			if sp == nil {
				continue
			}
			sp.remaining++
			if c.p0 == nil {
				c.p0 = sp
			} else {
				c.more = append(c.more, sp)
			}
		}
		t.children[m.ID] = c
		t.pendingTS.add(m.Stream, m.SystemTimestamp)
	}
	for _, m := range inputs {
		if sp := t.parents[m.ID]; sp.remaining == 0 {
			t.ready = append(t.ready, sp)
		}
	}
}

// expect sets how many destinations child id must reach.
func (t *swiftTracker) expect(m *weir.Message, dests int) {
	c := t.children[m.ID]
	if c == nil {
		return
	}
	c.remaining = dests
	if dests == 0 {
		t.childDone(c)
	}
}

// delivered records the acknowledgement of child id by the destination of
// route index route; a repeated one counts once.
func (t *swiftTracker) delivered(id msgid.ID, route int) {
	c := t.children[id]
	if c == nil || !c.acked.add(route) {
		return
	}
	c.remaining--
	if c.remaining <= 0 {
		t.childDone(c)
	}
}

func (t *swiftTracker) childDone(c *swiftChild) {
	delete(t.children, c.msg.ID)
	t.pendingTS.remove(c.msg.Stream, c.msg.SystemTimestamp)
	if c.p0 != nil {
		t.parentDone(c.p0)
	}
	for _, p := range c.more {
		t.parentDone(p)
	}
}

func (t *swiftTracker) parentDone(p *swiftParent) {
	p.remaining--
	if p.remaining == 0 {
		t.ready = append(t.ready, p)
	}
}

// takeReady returns the parents that may now be acknowledged.
func (t *swiftTracker) takeReady() []*swiftParent {
	out := t.ready[:0]
	for _, p := range t.ready {
		if p.acked {
			continue
		}
		p.acked = true
		delete(t.parents, p.msg.ID)
		t.bytes -= p.size
		out = append(out, p)
	}
	t.ready = nil
	return out
}

// count is the number of inputs not yet acknowledgeable.
func (t *swiftTracker) count() int { return len(t.parents) }

// heldBytes is the estimated size of the inputs not yet acknowledgeable.
func (t *swiftTracker) heldBytes() int { return t.bytes }

// minSystemTimestamp returns, per stream, the smallest SystemTimestamp of
// undelivered outputs.
func (t *swiftTracker) minSystemTimestamp() map[string]store.Timestamp {
	return t.pendingTS.mins()
}
