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
	// parents holds the internal inputs held, by id (an input delivered
	// again while held must not be held twice). Source records are not in
	// it: a source reads each offset once per life; sourceHeld counts
	// them, and batch holds the last source batch's (addSourceRecords), for
	// track.
	parents    map[msgid.ID]*swiftParent
	sourceHeld int
	batch      []swiftParent
	// readTwice catches a source record read twice (invariants only).
	readTwice map[msgid.ID]bool
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
// one parent (p0), merged ones more. It is reached through its offers'
// token (transport.Offer.Token), not by id.
type swiftChild struct {
	msg       *weir.Message
	p0        *swiftParent
	more      []*swiftParent
	remaining int
	// done: every destination acknowledged it (later acknowledgements are
	// repeats).
	done bool
	// acked holds the downstream destinations (route indexes) that
	// acknowledged it: each counts once.
	acked ackSet
}

func newSwiftTracker() *swiftTracker {
	return &swiftTracker{parents: map[msgid.ID]*swiftParent{}, pendingTS: streamMins{}}
}

// addSourceRecords registers a source batch's messages as parents (msgs[i]
// is recs[i]'s) with their offsets (the source reader marks them done by
// offset) and the sizes their source gave (connector.Record.Size; 0:
// estimated here), in one block: the next track's inputs.
func (t *swiftTracker) addSourceRecords(msgs []*weir.Message, recs []connector.Record) {
	block := make([]swiftParent, len(msgs))
	for i, m := range msgs {
		if invariants.Enabled {
			// A source reads each offset once per life (its position only
			// moves forward), and a new life has a new tracker.
			invariants.Check(!t.readTwice[m.ID], "swift source record %s read twice", m.ID)
			if t.readTwice == nil {
				t.readTwice = map[msgid.ID]bool{}
			}
			t.readTwice[m.ID] = true
		}
		p := &block[i]
		*p = swiftParent{msg: m, size: tables.SizeOr(recs[i].Size, m), offset: recs[i].Offset, fromSource: true}
		t.bytes += p.size
	}
	t.sourceHeld += len(msgs)
	t.batch = block
}

// track records the lineage of an epoch: inputs and each output's parents.
// It returns the outputs' children (index-aligned with outs; each must get
// its destination count from expect). Parents and children are allocated
// in one block each per epoch.
func (t *swiftTracker) track(inputs []*weir.Message, outs []*weir.Message, lineage [][]*weir.Message) []swiftChild {
	held := t.inputParents(inputs)
	children := make([]swiftChild, len(outs))
	var byMsg map[*weir.Message]*swiftParent // built on the first miss of the fast path
	next := 0
	for i, m := range outs {
		c := &children[i]
		c.msg = m
		for _, p := range lineage[i] {
			var sp *swiftParent
			// Fast path: outputs follow their inputs' order (one output
			// per input, as a Swift map or pass-through makes).
			if next < len(inputs) && inputs[next] == p {
				sp = held[next]
				next++
			} else {
				if byMsg == nil {
					byMsg = make(map[*weir.Message]*swiftParent, len(inputs))
					for k, in := range inputs {
						byMsg[in] = held[k]
					}
				}
				sp = byMsg[p]
			}
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
		t.pendingTS.add(m.Stream, m.SystemTimestamp)
	}
	// Parents without children are acknowledgeable at once: every record
	// of a source batch (a record matched to no input included), the held
	// internal inputs.
	if len(t.batch) > 0 {
		for i := range t.batch {
			if sp := &t.batch[i]; sp.remaining == 0 {
				t.ready = append(t.ready, sp)
			}
		}
	} else {
		for _, sp := range held {
			if sp.remaining == 0 {
				t.ready = append(t.ready, sp)
			}
		}
	}
	t.batch = nil
	return children
}

// inputParents returns the parents of an epoch's inputs, index-aligned:
// the source batch's records (addSourceRecords), or internal inputs, held
// now unless already held (delivered again while held: the same parent).
func (t *swiftTracker) inputParents(inputs []*weir.Message) []*swiftParent {
	held := make([]*swiftParent, len(inputs))
	if len(t.batch) > 0 {
		// A source's inputs are its batch, in order (its records are never
		// dropped as duplicates). They are matched by pointer all the same,
		// so that inputs that differ from the batch cannot take another
		// record's place.
		invariants.Check(len(t.batch) == len(inputs), "swift source: %d inputs for a batch of %d records", len(inputs), len(t.batch))
		k := 0
		for i, m := range inputs {
			for k < len(t.batch) && t.batch[k].msg != m {
				k++
			}
			if k < len(t.batch) {
				held[i] = &t.batch[k]
				k++
			}
		}
		return held
	}
	var block []swiftParent
	for i, m := range inputs {
		if sp, ok := t.parents[m.ID]; ok {
			held[i] = sp
			continue
		}
		if block == nil {
			block = make([]swiftParent, 0, len(inputs))
		}
		block = append(block, swiftParent{msg: m, size: tables.MessageSize(m)})
		sp := &block[len(block)-1]
		t.parents[m.ID] = sp
		t.bytes += sp.size
		held[i] = sp
	}
	return held
}

// expect sets how many destinations c must reach.
func (t *swiftTracker) expect(c *swiftChild, dests int) {
	c.remaining = dests
	if dests == 0 {
		t.childDone(c)
	}
}

// delivered records the acknowledgement of c by the destination of route
// index route; a repeated one counts once.
func (t *swiftTracker) delivered(c *swiftChild, route int) {
	if c.done || !c.acked.add(route) {
		return
	}
	c.remaining--
	if c.remaining <= 0 {
		t.childDone(c)
	}
}

func (t *swiftTracker) childDone(c *swiftChild) {
	c.done = true
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
		if p.fromSource {
			t.sourceHeld--
		} else {
			delete(t.parents, p.msg.ID)
		}
		t.bytes -= p.size
		out = append(out, p)
	}
	t.ready = nil
	return out
}

// count is the number of inputs not yet acknowledgeable.
func (t *swiftTracker) count() int { return len(t.parents) + t.sourceHeld }

// heldBytes is the estimated size of the inputs not yet acknowledgeable.
func (t *swiftTracker) heldBytes() int { return t.bytes }

// minSystemTimestamp returns, per stream, the smallest SystemTimestamp of
// undelivered outputs.
func (t *swiftTracker) minSystemTimestamp() map[string]store.Timestamp {
	return t.pendingTS.mins()
}
