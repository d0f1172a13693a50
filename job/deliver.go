package job

// Delivery: an output's destinations are every sink reading its stream and
// every downstream partition its receivers route it to. Sinks get it during
// the epoch (a sync sink writes it inside the epoch's transaction);
// downstream partitions only after the commit. Acknowledgements from both
// arrive on any goroutine and are queued for the job's goroutine.

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// offerChannel is a receiving partition, stream and origin (the invariant
// check of a sender's order, checkOfferOrder).
type offerChannel struct {
	dest   transport.PartitionID
	stream string
	origin transport.PartitionID // "" but for a sub-channel (transport.Offer.Origin)
}

// ackQueue collects acknowledgements from other goroutines for the job's
// goroutine: downstream acknowledgements of outputs by token and route
// (one shared hook per route index, so an offer allocates nothing for its
// acknowledgement), and sinks' acknowledgements of outputs.
// wake is signalled (one slot) by every push, so that an idle job learns at
// once that its outputs were delivered (a source job's idle wait has no
// other channel for it).
type ackQueue struct {
	mu   sync.Mutex
	ids  []routeAck
	outs []*output
	wake chan struct{}
	// spare buffers swapped in by drain, so that steady state allocates
	// nothing.
	spareIDs  []routeAck
	spareOuts []*output
}

func (q *ackQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// routeAck is a downstream acknowledgement, by the receiving partition of
// route index route of the output's stream (j.routes), of the output whose
// offer carried token: its *output (outbox) or *swiftChild (Swift).
type routeAck struct {
	token any
	route int
}

// pushAcks queues downstream acknowledgements along route index route.
func (q *ackQueue) pushAcks(route int, acks []transport.Acked) {
	q.mu.Lock()
	for _, a := range acks {
		q.ids = append(q.ids, routeAck{token: a.Token, route: route})
	}
	q.mu.Unlock()
	q.signal()
}

// pushOutput queues a sink's acknowledgement of out.
func (q *ackQueue) pushOutput(out *output) {
	q.mu.Lock()
	q.outs = append(q.outs, out)
	q.mu.Unlock()
	q.signal()
}

// drain applies everything queued: onID for each acknowledged id, onOutput
// for each acknowledged output.
func (q *ackQueue) drain(onID func(routeAck), onOutput func(*output)) {
	q.mu.Lock()
	ids, outs := q.ids, q.outs
	q.ids, q.outs = q.spareIDs[:0], q.spareOuts[:0]
	q.mu.Unlock()
	for _, id := range ids {
		onID(id)
	}
	for _, out := range outs {
		onOutput(out)
	}
	clear(ids)
	clear(outs)
	q.mu.Lock()
	q.spareIDs, q.spareOuts = ids[:0], outs[:0]
	q.mu.Unlock()
}

// drainAcks applies the queued acknowledgements to the outbox or the Swift
// tracker.
func (j *Job) drainAcks() { j.acks.drain(j.outputAcked, j.box.ack) }

// outputAcked applies one destination's acknowledgement of an output: the
// Swift tracker counts it, the outbox erases the output once every
// destination acknowledged it (an output delivered already stays so). A
// destination that acknowledges an output again (a transport may re-send
// an acknowledgement) counts once: otherwise an output with several
// destinations would be erased before the others had it.
func (j *Job) outputAcked(a routeAck) {
	switch t := a.token.(type) {
	case *swiftChild:
		j.swift.delivered(t, a.route)
	case *output:
		if t.acked.add(a.route) {
			j.box.ack(t)
		}
	}
}

// ackSet records which destinations — route indexes of an output's stream
// (j.routes) — acknowledged an output, so that each counts once.
type ackSet struct {
	bits  uint64
	extra map[int]struct{} // route indexes from 64 up (rare: a stream read by so many computations)
}

// add records route i and reports whether it is new.
func (a *ackSet) add(i int) bool {
	if i < 64 {
		bit := uint64(1) << i
		if a.bits&bit != 0 {
			return false
		}
		a.bits |= bit
		return true
	}
	if _, ok := a.extra[i]; ok {
		return false
	}
	if a.extra == nil {
		a.extra = map[int]struct{}{}
	}
	a.extra[i] = struct{}{}
	return true
}

// sinksPending reports whether a sink has progress to record.
func (j *Job) sinksPending() bool {
	for _, s := range j.sinks {
		if p, ok := s.sink.(connector.PendingSyncer); ok && p.PendingSync() {
			return true
		}
	}
	return false
}

// fetchInputs takes a batch from the transport and computes each message's
// key under this computation's group_by. The message struct is copied: the
// sender keeps its own. A message whose key cannot be computed fails the
// epoch, naming it: grouping it under some other key would silently change
// results. (Senders check their outputs' keys before they commit them, so
// this happens only to data written before that check existed.)
func (j *Job) fetchInputs() ([]*weir.Message, error) {
	raw := j.recv.Fetch(j.comp.Batch.MaxRows, j.comp.Batch.MaxBytes)
	out := make([]*weir.Message, len(raw))
	copies := make([]weir.Message, len(raw)) // one block for the batch
	j.origins = j.origins[:0]
	tags := j.tagsOrigins()
	if tags {
		if j.parentOrigin == nil {
			j.parentOrigin = map[*weir.Message]transport.PartitionID{}
		}
		clear(j.parentOrigin)
	}
	own := tables.FrontierRange{Lo: j.cfg.Partition.Lo, Hi: j.cfg.Partition.Hi, ToEnd: j.cfg.Partition.ToEnd}
	ranged := own.ToEnd || own.Hi != 0 // a partition spec built without its range (tests) takes every key
	n := 0
	for i, d := range raw {
		m := d.Msg
		cp := &copies[i]
		*cp = *m
		k, err := j.comp.KeyOf(cp.Payload)
		if err != nil {
			return nil, fmt.Errorf("job %s: input %s on stream %s: %w", j.cfg.Partition.ID, m.ID, m.Stream, err)
		}
		if ranged && !own.Contains(k.Hash) {
			// Routed by another layout of this computation
			// (controller/rescale.go): this job's life is over — it is
			// of an earlier layout and a sender of the new one reached
			// it before its worker stopped it (the network transport
			// addresses a partition's life by its routes, a heartbeat
			// behind) — or the sender's is (the switch fences those).
			// Processing it would put a key in two partitions, and an
			// acknowledgement would tell a live sender it was delivered:
			// leave it unacknowledged (the sender offers it again to
			// the partition's next life) and stop.
			return nil, fmt.Errorf("job %s: input %s on stream %s from %s has a key outside this partition's range %s: it was routed by another layout of %s (a rescale); this job's layout is not the sender's, so it stops without acknowledging it",
				j.cfg.Partition.ID, m.ID, m.Stream, d.From, own, j.comp.Name)
		}
		// An origin orders its sub-channel whatever the sender's token says.
		j.origins = append(j.origins, origin{from: d.From, via: d.Origin, ordered: d.Ordered || d.Origin != ""})
		if d.MaybeDuplicate {
			j.suspect[m.ID] = true
		}
		cp.Key = k
		out[n] = cp
		n++
		if tags && d.Ordered && d.Origin == "" && d.From != "" {
			j.parentOrigin[cp] = d.From
		}
	}
	return out[:n], nil
}

// tagsOrigins says whether this job offers its outputs with an Origin
// (transport.Offer.Origin): a Swift computation fed by other partitions,
// whose outputs inherit their single parent's id. Its channels interleave
// its upstreams' ids and are not ordered (orderedSender), but each
// origin's ids are: an upstream's ordered channel is FIFO, each epoch takes
// a contiguous run of it, and the epoch's outputs are offered sorted by id
// (record). Merged ids (allow_batching_with_relaxed_guarantees) have no
// single origin.
func (j *Job) tagsOrigins() bool {
	return j.comp.Swift() && !j.comp.IsSource() && !j.comp.AllowBatching
}

// outputOrigins returns, index-aligned with outs, each output's Origin: the
// partition its single parent came from on an ordered channel without an
// origin of its own (parentOrigin), or "" (nil if the job tags none).
func (j *Job) outputOrigins(outs []*weir.Message, lineage [][]*weir.Message) []transport.PartitionID {
	if !j.tagsOrigins() || len(j.parentOrigin) == 0 {
		return nil
	}
	o := make([]transport.PartitionID, len(outs))
	for i := range outs {
		if ps := lineage[i]; len(ps) == 1 {
			o[i] = j.parentOrigin[ps[0]]
		}
	}
	return o
}

// inlineStreams returns the output streams that no computation reads and
// whose sinks all deliver inline (connector.InlineDelivery): their
// outputs take no outbox entry (deliverInline). Derived once, at Init.
func (j *Job) inlineStreams() map[string]bool {
	in := map[string]bool{}
	for stream, sinks := range j.sinksOf {
		in[stream] = len(j.routes[stream]) == 0 && !slices.ContainsFunc(sinks, func(s *sinkInstance) bool {
			d, ok := s.sink.(connector.InlineDelivery)
			return !ok || !d.DeliversInline()
		})
	}
	return in
}

// deliverInline hands a fresh output of an inline stream (inlineStreams) to
// its sinks and reports true: it takes no outbox entry, no acknowledgement
// and no erase, since it is delivered exactly when this epoch commits (a
// failed commit discards the job, and the output with it). A sink that
// does not acknowledge it within Distribute fails the epoch.
func (j *Job) deliverInline(m *weir.Message) (bool, error) {
	if !j.inline[m.Stream] {
		return false, nil
	}
	for _, s := range j.sinksOf[m.Stream] {
		before := j.inlineAcks.Load()
		s.sink.Distribute(m, j.inlineDone)
		if j.inlineAcks.Load() != before+1 {
			return false, fmt.Errorf("job %s: sink %s delivers inline (connector.InlineDelivery) but did not acknowledge output %s once within Distribute",
				j.cfg.Partition.ID, s.plan.ID, m.ID)
		}
	}
	return true, nil
}

// register gives an outbox output its destinations: every sink consuming
// its stream and every downstream partition. Sinks get it now (a sync sink
// writes it inside this epoch's transaction); downstream partitions only
// after the commit (distribute), with the returned output as the offers'
// token.
func (j *Job) register(m *weir.Message, persisted bool) *output {
	sinks := j.sinksOf[m.Stream]
	out := j.box.add(m, len(j.routes[m.Stream])+len(sinks), persisted)
	for i, s := range sinks {
		if a, ok := s.sink.(connector.AtMostOnce); persisted && ok && a.DeliversAtMostOnce() {
			// Reloaded after a restart: an earlier life may have handed it
			// to this sink already (connector.AtMostOnce).
			j.box.ack(out)
			continue
		}
		s.sink.Distribute(m, j.sinkDone(out, i, s.plan.ID))
	}
	return out
}

// sinkDone returns the done callback of the i-th sink of out's stream: the
// first call counts (a sink may call it on any goroutine, and a faulty one
// more than once); out.sinkCalled has one bit per sink (a stream with more
// than 64 sinks gets a flag of its own per callback).
func (j *Job) sinkDone(out *output, i int, sink string) func(error) {
	if i >= 64 {
		var called atomic.Bool
		return func(err error) {
			if called.CompareAndSwap(false, true) {
				j.sinkDelivered(out, sink, err)
			}
		}
	}
	bit := uint64(1) << i
	return func(err error) {
		if out.sinkCalled.Or(bit)&bit == 0 {
			j.sinkDelivered(out, sink, err)
		}
	}
}

func (j *Job) sinkDelivered(out *output, sink string, err error) {
	if err != nil {
		j.cfg.Logf("%s: output %s to %s failed: %v (kept in the outbox)", j.cfg.Partition.ID, out.msg.ID, sink, err)
		return
	}
	j.acks.pushOutput(out)
}

// outputSuspect says which of this epoch's outputs may have been delivered
// before: a Swift output recomputed from a suspect input (its id is
// inherited, so an earlier life may have sent it). A Transform output has a
// fresh id and has never been sent.
func (j *Job) outputSuspect(outs []*weir.Message, lineage [][]*weir.Message) func(*weir.Message) bool {
	if !j.comp.Swift() || len(j.suspect) == 0 {
		return func(*weir.Message) bool { return false }
	}
	sus := make(map[msgid.ID]bool)
	for i, m := range outs {
		for _, p := range lineage[i] {
			if j.suspect[p.ID] {
				sus[m.ID] = true
				break
			}
		}
	}
	return func(m *weir.Message) bool { return sus[m.ID] }
}

// destinations computes, before an epoch commits its outputs, the
// receiving partition of each output for every computation reading its
// stream (index-aligned with outs). An output lacking a column its
// receiver groups by fails the epoch, naming the output, the computation
// and the column: the user code must be fixed, and nothing is committed.
func (j *Job) destinations(outs []*weir.Message) ([][]transport.PartitionID, error) {
	dests := make([][]transport.PartitionID, len(outs))
	n := 0
	for _, m := range outs {
		n += len(j.routes[m.Stream])
	}
	block := make([]transport.PartitionID, n) // one allocation for the batch
	for i, m := range outs {
		routes := j.routes[m.Stream]
		if len(routes) == 0 {
			continue
		}
		d := block[:len(routes):len(routes)]
		block = block[len(routes):]
		for ri, r := range routes {
			k, err := r.KeyOf(m.Payload)
			if err != nil {
				return nil, fmt.Errorf("computation %s: output %s on stream %s cannot be routed to %s: %w", j.comp.Name, m.ID, m.Stream, r.Name, err)
			}
			d[ri] = j.partitionID(r, plan.PartitionIndex(k.Hash, r.Partitions))
		}
		dests[i] = d
	}
	return dests, nil
}

// partitionID is plan.KeyedPartitionID(r.Name, i), built once per partition.
func (j *Job) partitionID(r *plan.CompPlan, i int) transport.PartitionID {
	ids := j.partitionIDs[r.Name]
	if ids == nil {
		ids = make([]transport.PartitionID, r.Partitions)
		for p := range ids {
			ids[p] = plan.KeyedPartitionID(r.Name, p)
		}
		if j.partitionIDs == nil {
			j.partitionIDs = map[string][]transport.PartitionID{}
		}
		j.partitionIDs[r.Name] = ids
	}
	return ids[i]
}

// distribute offers outputs to the downstream partitions dests names
// (from destinations), in batches per destination (offers.go); tokens
// (index-aligned) are the outputs' *output or *swiftChild, handed back with
// their acknowledgements; origins (index-aligned, or nil) their
// transport.Offer.Origin; maybeDup says which may have been delivered
// before.
func (j *Job) distribute(outs []*weir.Message, dests [][]transport.PartitionID, tokens []any, origins []transport.PartitionID, maybeDup func(*weir.Message) bool) {
	for i, m := range outs {
		if len(dests[i]) == 0 {
			continue
		}
		dup := maybeDup(m)
		size := outputSize(m, tokens[i]) // once per output, not per destination or retry
		var from transport.PartitionID
		if origins != nil {
			from = origins[i]
		}
		for ri, dest := range dests[i] {
			j.enqueue(dest, pendingOffer{msg: m, size: size, route: ri, maybeDup: dup, token: tokens[i], origin: from})
		}
	}
	j.flushTouched()
}

// flushSwift acknowledges the Swift inputs whose outputs are all delivered:
// upstream for internal inputs, to the source reader for source records.
// It runs only after the epoch's commit, so an acknowledged input's effect on
// state is durable.
func (j *Job) flushSwift() {
	if j.swift == nil {
		return
	}
	done := j.swift.takeReady()
	if len(done) == 0 {
		return
	}
	if j.src != nil {
		j.src.markDone(done)
		return
	}
	acked := make([]msgid.ID, len(done))
	for i, p := range done {
		acked[i] = p.msg.ID
	}
	j.recv.Ack(acked...)
}

// tellSinks gives the sinks that observe it the computation's progress;
// blocked: the outbox is full (connector.Progress.Backpressure).
func (j *Job) tellSinks(ctl board.Control, blocked bool) {
	var p *connector.Progress
	for _, s := range j.sinks {
		o, ok := s.sink.(connector.ProgressObserver)
		if !ok {
			continue
		}
		if p == nil {
			p = &connector.Progress{EventWatermark: j.eventWM, Draining: ctl.Draining, Final: ctl.UpstreamDone, Backpressure: blocked}
			if j.src != nil {
				p.SystemWatermark = j.src.nextSystemTimestamp()
				p.EventWatermark, _ = j.src.eventWatermark(j.st.Now())
				p.Final = j.src.part.Finite() && j.src.end
			} else {
				p.SystemWatermark = j.minInputWatermark()
			}
		}
		o.Progress(*p)
	}
}

// outputSize is MessageSize(m) for an output whose token is tok: an
// outbox output's size is computed once; a Swift output that forwards its
// only parent's row inherits the parent's size.
func outputSize(m *weir.Message, tok any) int {
	switch t := tok.(type) {
	case *output:
		return t.sizeOf()
	case *swiftChild:
		if p := t.p0; p != nil && len(t.more) == 0 && sameRow(p.msg.Payload, m.Payload) {
			return p.size - len(p.msg.ID) - len(p.msg.Stream) + len(m.ID) + len(m.Stream)
		}
	}
	return tables.MessageSize(m)
}

// sameRow reports whether a and b are the same map (not equal contents:
// the same one, as a Swift output that forwards its input's row) with as
// many columns as when the parent was sized. The size is an estimate for
// buffer bounds: code that rewrites values of its input's row in place and
// forwards it may make it stale, never a result.
func sameRow(a, b weir.Row) bool {
	return len(a) == len(b) && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
