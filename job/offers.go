package job

// Offers: an epoch's outputs go to each receiving partition as batches
// (transport.Sender.OfferBatch), one per run of outputs along the same
// route, in emission order. An output a full buffer refused waits in its
// destination's queue with everything emitted after it to that
// destination: nothing overtakes it (the lineage ordering guarantee).

import (
	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
)

// pendingOffer is one output to one receiving partition, along route index
// route of its stream (j.routes).
type pendingOffer struct {
	msg      *weir.Message
	size     int
	route    int
	maybeDup bool
	token    any                   // transport.Offer.Token
	origin   transport.PartitionID // transport.Offer.Origin
}

// offerQueue holds the outputs to one receiving partition that are not yet
// offered or were refused, in emission order.
type offerQueue struct {
	dest    transport.PartitionID
	waiting []pendingOffer
	// batch is OfferBatch's argument, reused.
	batch []transport.Offer
	// touched: queued in j.touched for the current distribute.
	touched bool
}

// offerQueues are a job's queues by destination. blocked lists, in the
// order they were first refused, the queues that hold refused outputs;
// count is the number of outputs they hold.
type offerQueues struct {
	byDest  map[transport.PartitionID]*offerQueue
	touched []*offerQueue
	blocked []*offerQueue
	count   int
}

// queue returns dest's queue.
func (qs *offerQueues) queue(dest transport.PartitionID) *offerQueue {
	q := qs.byDest[dest]
	if q == nil {
		if qs.byDest == nil {
			qs.byDest = map[transport.PartitionID]*offerQueue{}
		}
		q = &offerQueue{dest: dest}
		qs.byDest[dest] = q
	}
	return q
}

// enqueue adds o to dest's queue, to be offered by flushTouched.
func (j *Job) enqueue(dest transport.PartitionID, o pendingOffer) {
	if invariants.Enabled {
		j.checkOfferOrder(dest, o)
	}
	q := j.offers.queue(dest)
	if !q.touched {
		q.touched = true
		j.offers.touched = append(j.offers.touched, q)
	}
	q.waiting = append(q.waiting, o)
	j.offers.count++
}

// flushTouched offers the queues enqueue added to; a queue that was already
// blocked stays behind its refused output until retryOffers.
func (j *Job) flushTouched() {
	for _, q := range j.offers.touched {
		q.touched = false
		if !j.isBlocked(q) {
			j.flush(q)
		}
	}
	clear(j.offers.touched)
	j.offers.touched = j.offers.touched[:0]
}

func (j *Job) isBlocked(q *offerQueue) bool {
	for _, b := range j.offers.blocked {
		if b == q {
			return true
		}
	}
	return false
}

// flush offers q's outputs in order, one batch per run of the same route,
// until the destination refuses one; a refused queue joins the blocked
// list.
func (j *Job) flush(q *offerQueue) {
	done := 0
	for done < len(q.waiting) {
		route := q.waiting[done].route
		end := done + 1
		for end < len(q.waiting) && q.waiting[end].route == route {
			end++
		}
		q.batch = q.batch[:0]
		for _, o := range q.waiting[done:end] {
			q.batch = append(q.batch, transport.Offer{Msg: o.msg, Size: o.size, MaybeDup: o.maybeDup, Token: o.token, Origin: o.origin})
		}
		done += j.cfg.Hub.OfferBatch(j.sender, q.dest, q.batch, j.ackHook(route))
		clear(q.batch)
		if done < end {
			break // refused: the rest waits for room
		}
	}
	rest := copy(q.waiting, q.waiting[done:])
	clear(q.waiting[rest:])
	q.waiting = q.waiting[:rest]
	j.offers.count -= done
	if rest > 0 && !j.isBlocked(q) {
		j.offers.blocked = append(j.offers.blocked, q)
	}
}

// retryOffers offers the refused outputs again, per destination in order.
func (j *Job) retryOffers() {
	if len(j.offers.blocked) == 0 {
		return
	}
	blocked := j.offers.blocked
	j.offers.blocked = nil
	for _, q := range blocked {
		j.flush(q)
	}
}

// waitingOffers is the number of outputs waiting for room downstream.
func (j *Job) waitingOffers() int { return j.offers.count }

// roomWait returns the channel signalled when the first blocked
// destination gains room (nil if none is blocked).
func (j *Job) roomWait() <-chan struct{} {
	if len(j.offers.blocked) == 0 {
		return nil
	}
	return j.cfg.Hub.Ready(j.offers.blocked[0].dest)
}

// ackHook returns the acknowledgement hook of offers along route index ri
// of their stream: it queues the acknowledgements and the route for the
// job's goroutine (outputAcked), one lock per acknowledged batch. One hook
// per route index serves every output.
func (j *Job) ackHook(ri int) *transport.AckHook {
	for len(j.ackHooks) <= ri {
		r := len(j.ackHooks)
		j.ackHooks = append(j.ackHooks, transport.NewAckHook(func(acks []transport.Acked) { j.acks.pushAcks(r, acks) }))
	}
	return j.ackHooks[ri]
}

// checkOfferOrder checks the order a sender promised (transport.Delivery,
// transport.Offer.Origin), per receiving partition, stream and origin:
// an ordered sender's offers have strictly increasing ids in each life; a
// sub-channel's (an offer with an Origin) do where it can be told from the
// offer — those of messages certainly never delivered before (not
// maybeDup) — since a re-send of a re-delivered input, processed here or in
// an earlier life, may come below them.
func (j *Job) checkOfferOrder(dest transport.PartitionID, o pendingOffer) {
	if o.origin == "" && !j.sender.Ordered() || o.origin != "" && o.maybeDup {
		return
	}
	k := offerChannel{dest, o.msg.Stream, o.origin}
	last, ok := j.lastOffered[k]
	invariants.Check(!ok || o.msg.ID > last, "%s offered %s to %s (origin %q) after %s", j.cfg.Partition.ID, o.msg.ID, dest, o.origin, last)
	if j.lastOffered == nil {
		j.lastOffered = map[offerChannel]msgid.ID{}
	}
	j.lastOffered[k] = o.msg.ID
}
