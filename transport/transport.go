// Package transport delivers messages between jobs of a pipeline: from the
// job that produced a message (the sender) to the job that currently owns
// the receiving partition, and the acknowledgement back.
//
// The contract is the push model of MillWheel and Flow:
//
//   - A sender keeps every output it sends (in its outbox, or, for Swift
//     computations, by holding the parent input) until the message is
//     acknowledged. Delivery is at-least-once: a message may be delivered to
//     a receiver many times, to successive jobs of the same partition, and
//     re-sent with the same id after the sender restarts.
//   - A receiver acknowledges a message only after the commit that recorded
//     its processing is durable (or immediately, if its dedup says it was
//     already processed). The receiver deduplicates by message id. An
//     acknowledgement may reach the sender more than once (a network
//     transport re-sends one whose delivery it cannot confirm); the sender
//     counts each receiving partition's acknowledgement of a message once
//     (the AckHook and Token an offer is made with identify its destination
//     to the sender).
//   - Buffers are bounded in bytes: when a receiving partition's buffer is
//     full, OfferBatch takes no more and the sender keeps the rest, so a
//     slow receiver slows its senders (backpressure).
//   - Channel order: the messages one sending partition offers to one
//     receiving partition are delivered in the order they were offered; an
//     offer of an id that is already buffered keeps the buffered copy's
//     place. Every delivery names its sending partition (Delivery.From), and
//     whether that sender is ordered (Delivery.Ordered): it offers, on each
//     stream, strictly increasing ids to each receiving partition, in every
//     life, re-sends of earlier ids aside. For an ordered channel a receiver
//     may deduplicate by a frontier — the highest id it processed from that
//     sender on that stream — instead of remembering every id. A sender
//     that is not ordered may promise order per origin (Offer.Origin,
//     Delivery.Origin): then each sub-channel (sender, origin) is ordered,
//     with a frontier of its own.
//
// The in-process implementation (Hub) serves the embedded engine; a network
// implementation for the distributed mode implements the same behaviour.
package transport

import (
	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// PartitionID names a receiving partition, e.g. "Counter/3".
type PartitionID string

// AckHook receives the acknowledgements of the messages offered with it
// (Sender.OfferBatch), several per call: the messages one receiver's Ack
// acknowledges that were offered with the same hook, in the receiver's
// order. A message is acknowledged once the receiving partition has
// durably processed it (or found it already processed). A sender that
// offers an epoch's outputs with one hook per route pays one call per
// acknowledged batch instead of one per message. The hook may run on the
// receiver's goroutine and must not block; acks is valid only during the
// call. Hooks compare by identity: create one with NewAckHook and keep it.
type AckHook struct {
	fn func(acks []Acked)
}

// Acked is the acknowledgement of one offered message: its id and the
// offer's Token.
type Acked struct {
	ID    msgid.ID
	Token any
}

// NewAckHook returns a hook that calls fn with acknowledged messages.
func NewAckHook(fn func(acks []Acked)) *AckHook { return &AckHook{fn: fn} }

// Acked tells the hook's sender that messages were acknowledged (what a
// transport calls).
func (h *AckHook) Acked(acks ...Acked) { h.fn(acks) }

// Offer is one message of an OfferBatch.
type Offer struct {
	Msg  *weir.Message
	Size int
	// MaybeDup says the message may have been delivered before (see
	// Delivery).
	MaybeDup bool
	// Token is the sender's own handle of the message, handed back with
	// its acknowledgement (Acked), so that the sender needs no lookup by
	// id. A later offer of the same id replaces it, as it replaces the
	// hook.
	Token any
	// Origin, if set, is the upstream partition the message's single parent
	// came from, on an ordered channel, and promises that the sub-channel
	// (sender, Origin) is ordered whatever the token's promise (see the
	// package comment). A Swift partition fed by several ordered upstream
	// partitions interleaves their ids, but it offers, on each stream,
	// strictly increasing ids of each origin to each receiving partition, in
	// every life (re-sends aside), every life starting at ids its
	// predecessors had delivered and had acknowledged; the receiver can then
	// deduplicate per (sender, origin) by a frontier. The origin travels
	// with the message wherever it is delivered (the network transport
	// included): a receiver that processed it through such a frontier keeps
	// no row of its id. Empty: the offer has the token's promise.
	Origin PartitionID
}

// Delivery is a message handed to a receiver.
//
// MaybeDuplicate is false only when this message has certainly never been
// delivered to the partition before: its sender offers it for the first
// time in the sender's current life, and no earlier attachment of the
// partition fetched it. A receiver may skip its dedup lookup for such a
// message (it cannot be in the dedup table). Everything else — outputs a
// restarted sender reloaded from its outbox, Swift outputs recomputed from
// re-delivered inputs, messages an earlier attachment fetched — is
// MaybeDuplicate and must be looked up.
//
// From is the partition that offered the message (empty for an unfenced
// offer under the zero SenderToken); Ordered says that sender's channels
// are ordered (see the package comment). Both describe the newest offer of
// the id.
type Delivery struct {
	Msg            *weir.Message
	MaybeDuplicate bool
	// Size is the Size of the offer that buffered the message: what its
	// sender counted against buffers, which a node passing the message on
	// counts again without sizing it anew (0: the sender gave none).
	Size int
	From PartitionID
	// Origin is the newest offer's Origin: if set, the sub-channel (From,
	// Origin) is ordered, whatever Ordered (the token's promise) says.
	Origin  PartitionID
	Ordered bool
}

// SenderToken identifies the job currently sending for a partition. The
// hub fences senders as the store fences commits: registering a new sender
// for a partition (RegisterSender) waits for every offer in flight under the
// previous token and makes every later offer under it a no-op. A zombie job
// — replaced while it still runs — can therefore neither deliver a message
// its replacement is already re-sending (which the receiver, seeing it
// unmarked, would process twice) nor take over the acknowledgement hook of
// its replacement's message. The zero token is unfenced (tests and tools).
//
// A token also names its partition and whether the sender is ordered
// (RegisterSender): deliveries of its offers carry both.
type SenderToken struct {
	fence   *senderFence
	gen     uint64
	ordered bool
}

// Ordered reports whether the token was registered as an ordered sender.
func (t SenderToken) Ordered() bool { return t.ordered }

// Partition is the sending partition the token was registered for ("" for
// the zero token).
func (t SenderToken) Partition() PartitionID {
	if t.fence == nil {
		return ""
	}
	return t.fence.partition
}

// Sender offers messages to receiving partitions.
type Sender interface {
	// OfferBatch hands offers to partition p in order, with ack as every
	// message's acknowledgement hook, and returns how many it took: a
	// prefix of offers (all of them, or up to the first that did not fit
	// p's buffer). The caller keeps the rest and offers them again later
	// (see Ready). Offering an id that is already buffered and
	// unacknowledged takes no room and replaces its hook and Token (the
	// newest sender of an id is the one to tell). A nil ack tells nobody.
	// Under a superseded token every offer is dropped, never acknowledged,
	// and counted as taken.
	OfferBatch(from SenderToken, p PartitionID, offers []Offer, ack *AckHook) int
	// Ready returns a channel that is signalled when p's buffer gains room.
	Ready(p PartitionID) <-chan struct{}
}

// Receiver is the receiving side of one partition, used by the job that
// currently owns it.
type Receiver interface {
	// Fetch returns up to maxRows buffered messages (and at most maxBytes,
	// but always at least one if any is available) that this attachment has
	// not fetched yet, in arrival order.
	Fetch(maxRows, maxBytes int) []Delivery
	// Ack acknowledges messages by id and frees their buffer space.
	Ack(ids ...msgid.ID)
	// Pending is the number of buffered unacknowledged messages.
	Pending() int
	// Available is the number of buffered messages this attachment has not
	// fetched yet (what the next Fetch could return).
	Available() int
	// Notify returns a channel signalled when new messages arrive.
	Notify() <-chan struct{}
	// Detach ends this attachment; messages fetched but not acknowledged
	// become available to the next attachment.
	Detach()
}
