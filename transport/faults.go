package transport

import "github.com/weir-stream/weir/msgid"

// Faults injects the delivery faults of a real network into a Hub, for
// fault-injection tests (internal/chaos). A Hub without Faults (the default)
// never consults it: the hot path pays one nil check per offer and per
// acknowledged id, and allocates nothing more.
//
// Both faults stay inside the transport contract (see the package comment
// and Delivery), so an engine that keeps its side of the contract must stay
// exactly-once under them:
//
//   - LoseAck: a receiver's acknowledgement is lost on its way back to the
//     sender. The sender never hears of it and, as a network sender does
//     after its ack timeout, sends the message again: the entry stays in the
//     mailbox, becomes fetchable again and is marked MaybeDuplicate (it was
//     delivered once). The receiver's dedup finds it processed and
//     acknowledges it again; that acknowledgement may be lost too.
//   - Redeliver: the network delivers an accepted message a second time,
//     after the receiver acknowledged the first copy (a late duplicate). The
//     copy is MaybeDuplicate, and its acknowledgement reaches the sender's
//     AckHook again, so the sender sees the same message acknowledged twice.
//
// Methods are called with the mailbox's lock held: they must be quick and
// must not call back into the Hub.
type Faults interface {
	// LoseAck reports whether the acknowledgement of id by partition p is
	// lost.
	LoseAck(p PartitionID, id msgid.ID) bool
	// Redeliver reports whether message id, just accepted for partition p,
	// will be delivered a second time after it is acknowledged.
	Redeliver(p PartitionID, id msgid.ID) bool
}

// SetFaults makes the hub inject f's faults. REQUIRES: called before the
// hub's first OfferBatch, Attach or Ready (mailboxes take the faults when they
// are created); nil switches nothing off that is already created.
func (h *Hub) SetFaults(f Faults) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = f
}

// loseAck applies a LoseAck fault to e: if the fault fires, e stays
// unacknowledged and becomes fetchable again as a maybe-duplicate. REQUIRES:
// b.mu held, b.faults != nil.
func (b *mailbox) loseAck(e *entry, id msgid.ID) bool {
	if !b.faults.LoseAck(b.partition, id) {
		return false
	}
	e.fetched, e.maybeDup = false, true
	b.cursor = 0 // Fetch skips fetched and acknowledged entries
	signal(b.notify)
	return true
}

// redeliver enqueues the late duplicate of the acknowledged entry e.
// REQUIRES: b.mu held, e acknowledged and removed from byID.
func (b *mailbox) redeliver(e *entry) {
	if _, ok := b.byID[e.msg.ID]; ok {
		return // the sender offered it again meanwhile: that copy stands in
	}
	// A copy of the whole entry, so that it is delivered as the original
	// was (its sender, origin and order: a duplicate without its origin
	// would miss the frontier that deduplicates it).
	c := new(entry)
	*c = *e
	c.fetched, c.acked, c.redeliver, c.maybeDup = false, false, false, true
	b.entries = append(b.entries, c)
	b.byID[c.msg.ID] = c
	b.bytes += c.size
	b.highWater = max(b.highWater, b.bytes)
	signal(b.notify)
}
