package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Register serves the node's Push stream on s.
func (n *Node) Register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "weir.Transport",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName: "Push", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, s grpc.ServerStream) error { return n.push(s) },
		}},
	}, n)
}

// streamSeqKey is the metadata key of a push stream's sequence number: the
// sending node numbers its streams in increasing order (Node.streamSeq), so
// that the receiving side of a channel can tell the newest stream from a
// late one. A stream without it counts as 0 (the newest arrival wins).
const streamSeqKey = "weir-push-seq"

// push serves one channel's stream: it offers each message into the
// receiving life's mailbox in order — waiting for room when the mailbox is
// full, which stops reading the stream, so that HTTP/2 flow control
// backpressures the sender — and streams back the acknowledgements of the
// receiving job. It ends with a retry or fenced frame when a message
// cannot be delivered here, and with a retry frame when a newer stream of
// the same channel takes over (inChannel).
func (n *Node) push(s grpc.ServerStream) error {
	ctx := s.Context()
	n.streams.Add(1)
	defer n.streams.Add(-1)
	acks := newAckQueue()
	done := make(chan error, 1)
	go func() { done <- acks.send(s) }()
	st := &inStream{seq: streamSeq(ctx), acks: acks, gone: make(chan struct{})}
	var ic *inChannel
	var key inKey
	// end releases the channel first, so that acknowledgements made from
	// now on wait for the next stream instead of this closing one.
	end := func(final *ackFrame) error {
		if ic != nil {
			ic.release(st)
		}
		acks.close(final)
		return <-done
	}
	finish := func(code byte, reason string) error { return end(&ackFrame{Code: code, Reason: reason}) }
	for {
		var f pushFrame
		if err := s.RecvMsg(&f); err != nil {
			end(nil)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		k := inKey{from: f.From, to: f.To, fromLease: f.FromLease, toLease: f.ToLease}
		if ic == nil {
			key = k
			var reason string
			if ic, reason = n.claim(k, st); ic == nil {
				return finish(replyRetry, reason)
			}
		} else if k != key {
			return finish(replyRetry, fmt.Sprintf("a frame of channel %s#%d>%s#%d on the stream of %s#%d>%s#%d", k.from, k.fromLease, k.to, k.toLease, key.from, key.fromLease, key.to, key.toLease))
		}
		for msgs := f.Msgs; len(msgs) > 0; {
			for {
				taken, code, room, reason := ic.deliver(n, st, k, msgs)
				n.received.Add(uint64(taken))
				msgs = msgs[taken:]
				if code == replyAck {
					break
				}
				if code == superseded {
					return finish(replyRetry, reason)
				}
				if room == nil {
					if code == replyRetry {
						n.mu.Lock()
						n.stats.Retried++
						n.mu.Unlock()
					}
					return finish(code, reason)
				}
				select {
				case <-ctx.Done():
					return finish(replyRetry, "stream ended")
				case <-st.gone:
					// Its client has most likely gone silent: finish's
					// wait for the ack sender ends at the latest when the
					// server's keepalive closes the connection.
					return finish(replyRetry, "superseded by a newer stream of the channel")
				case <-room:
				}
			}
		}
	}
}

// streamSeq returns the sequence number the sender put in the stream's
// metadata (0 if none).
func streamSeq(ctx context.Context) uint64 {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(streamSeqKey)
	if len(v) != 1 {
		return 0
	}
	seq, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return 0
	}
	return seq
}

// superseded is the internal outcome of an offer by a stream that is no
// longer its channel's newest.
const superseded byte = 254

// inKey names the receiving side of one channel towards one receiving
// life: the mailbox it offers into and the sending life it offers for.
type inKey struct {
	from, to           transport.PartitionID
	fromLease, toLease store.LeaseID
}

// inChannel is the receiving side of one channel (inKey). Its newest
// stream wins: a stream of the channel with a larger sequence number (or,
// without one, a later arrival) takes over, and from then on
//
//   - only the newest stream offers: every offer holds mu and checks that
//     its stream is current, so an older stream's handler — still alive
//     because its client went silent, and holding messages it read before —
//     can neither re-offer, unmarked, a message the receiver processed and
//     acknowledged meanwhile, nor interleave its copies with the newest
//     stream's (whose order, oldest unacknowledged first, is the channel's);
//   - every acknowledgement goes to the newest stream: the mailbox entries
//     carry the channel's hook (acked), not a stream's, so a message an older
//     stream offered is acknowledged to the stream its sender listens on.
//     Acknowledgements made while no stream is open wait in pending.
//
// An acknowledgement the older stream already sent into the silence is
// lost; its message was acknowledged in the mailbox before the newest
// stream took over, so the newest stream's re-send of it is a new entry,
// marked maybe-duplicate, that the receiver finds processed and
// acknowledges again.
type inChannel struct {
	mu      sync.Mutex
	seq     uint64
	cur     *inStream // nil between streams
	pending []transport.Acked
	// box is the receiving life's mailbox, mailbox(k.to, k.toLease).
	box transport.PartitionID
	// hook is the AckHook of every message the channel offers (acked);
	// offers is deliver's buffer.
	hook   *transport.AckHook
	offers []transport.Offer
}

// inStream is one push stream's hold on its channel.
type inStream struct {
	seq  uint64
	acks *ackQueue
	// gone is closed when a newer stream of the channel takes over.
	gone chan struct{}
}

// claim makes st the newest stream of channel k. It returns nil and why
// if a newer stream of the channel has been seen or the receiving life
// does not run here (then no inChannel is made: they exist only for the
// lives running here, JobEnded forgets them). The older stream's handler
// stops offering at once and ends (gone); the acknowledgements it had not
// sent, and those made while no stream was open, go out on st.
func (n *Node) claim(k inKey, st *inStream) (*inChannel, string) {
	n.mu.Lock()
	ic, ok := n.inChannels[k]
	if !ok {
		if n.local[k.to] != k.toLease {
			n.mu.Unlock()
			return nil, fmt.Sprintf("%s#%d does not run here", k.to, k.toLease)
		}
		ic = &inChannel{box: mailbox(k.to, k.toLease)}
		ic.hook = transport.NewAckHook(ic.acked)
		n.inChannels[k] = ic
	}
	n.mu.Unlock()
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if st.seq < ic.seq {
		// A late stream: its sender has moved on to a newer one.
		return nil, "a newer stream of the channel has been seen"
	}
	if old := ic.cur; old != nil {
		close(old.gone)
		for _, id := range old.acks.take() {
			ic.pending = append(ic.pending, transport.Acked{ID: id})
		}
		n.mu.Lock()
		n.stats.Superseded++
		n.mu.Unlock()
	}
	ic.seq, ic.cur = st.seq, st
	st.acks.add(ic.pending)
	ic.pending = nil
	return ic, ""
}

// release ends st's hold on the channel (if it is still the newest):
// acknowledgements wait in pending for the next stream.
func (ic *inChannel) release(st *inStream) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.cur == st {
		ic.cur = nil
	}
}

// acked is the hook of every message the channel offered (its AckHook):
// it sends the acknowledgements on the channel's newest stream.
func (ic *inChannel) acked(acks []transport.Acked) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.cur == nil {
		ic.pending = append(ic.pending, acks...)
		return
	}
	ic.cur.acks.add(acks)
}

// deliver offers msgs, the messages of one frame with the same Ordered
// flag from the first on (see Node.deliver), for stream st; superseded if
// st is no longer the newest stream of the channel.
func (ic *inChannel) deliver(n *Node, st *inStream, k inKey, msgs []pushed) (taken int, code byte, room <-chan struct{}, reason string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.cur != st {
		return 0, superseded, nil, "superseded by a newer stream of the channel"
	}
	ordered := msgs[0].Ordered
	ic.offers = ic.offers[:0]
	for _, m := range msgs {
		if m.Ordered != ordered {
			break
		}
		ic.offers = append(ic.offers, transport.Offer{Msg: m.Msg, Size: m.Size, MaybeDup: m.MaybeDup, Origin: m.Origin})
	}
	// replyAck with msgs left: the rest has the other Ordered flag; the
	// caller delivers it next.
	taken, code, room, reason = n.deliver(k.from, k.fromLease, k.to, k.toLease, ic.box, ic.offers, ic.hook, ordered)
	clear(ic.offers)
	return taken, code, room, reason
}

// forgetInLocked drops the receiving sides of channels matching drop (their
// mailbox or sending life is gone). REQUIRES: n.mu held.
func (n *Node) forgetInLocked(drop func(inKey) bool) {
	for k := range n.inChannels {
		if drop(k) {
			delete(n.inChannels, k)
		}
	}
}

// ackQueue collects a stream's acknowledgements from the receiving job's
// goroutine (add must not block) and sends them on one goroutine.
type ackQueue struct {
	mu     sync.Mutex
	ids    []msgid.ID
	final  *ackFrame
	closed bool
	wake   chan struct{}
}

func newAckQueue() *ackQueue { return &ackQueue{wake: make(chan struct{}, 1)} }

// add queues the ids of acks for sending: a run of the channel's
// AckHook, or the acknowledgements a new stream takes over (claim).
func (q *ackQueue) add(acks []transport.Acked) {
	if len(acks) == 0 {
		return
	}
	q.mu.Lock()
	if !q.closed {
		for _, a := range acks {
			q.ids = append(q.ids, a.ID)
		}
	}
	q.mu.Unlock()
	q.signal()
}

// take removes and returns the acknowledgements not sent yet.
func (q *ackQueue) take() []msgid.ID {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.ids
	q.ids = nil
	return ids
}

func (q *ackQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close makes send flush what it has, send final (if any) and return.
func (q *ackQueue) close(final *ackFrame) {
	q.mu.Lock()
	q.closed, q.final = true, final
	q.mu.Unlock()
	q.signal()
}

func (q *ackQueue) send(s grpc.ServerStream) error {
	for range q.wake {
		q.mu.Lock()
		ids, closed, final := q.ids, q.closed, q.final
		q.ids = nil
		q.mu.Unlock()
		if len(ids) > 0 {
			if err := s.SendMsg(&ackFrame{Code: replyAck, IDs: ids}); err != nil {
				return err
			}
		}
		if closed {
			if final != nil {
				return s.SendMsg(final)
			}
			return nil
		}
	}
	return nil
}
