package remote

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// Batch bounds of one push frame.
const (
	frameRows  = 256
	frameBytes = 1 << 20
)

// retryBackoff is how long a channel waits before sending again after a
// receiver said "not now" without a route change here (its own routes
// lag), or after a broken stream.
const retryBackoff = 50 * time.Millisecond

// stopped is the internal outcome of a channel whose sending life ended.
const stopped byte = 255

// channelKey names one channel: a life of a sending partition and a
// receiving partition.
type channelKey struct {
	from      transport.PartitionID
	fromLease store.LeaseID
	to        transport.PartitionID
}

func channelBox(k channelKey) transport.PartitionID {
	return transport.PartitionID(fmt.Sprintf("%s#%d>%s", k.from, k.fromLease, k.to))
}

// channel forwards one channel's box to the receiving partition's newest
// life, in offer order, and acknowledges in the box what the receiver
// acknowledged (which runs the sending job's ack hooks). Every (re)start of
// delivery — a new receiving life, a reconnection, a stream left without
// acknowledgements for the AckTimeout (watch) — attaches to the box
// afresh, so it sends again, marked maybe-duplicate, everything not yet
// acknowledged, oldest first: nothing is lost with a connection, and the
// channel's order holds for each receiving life. Each stream carries a
// sequence number larger than the channel's earlier streams' (the
// receiver lets the newest stream win, see inChannel).
type channel struct {
	n    *Node
	key  channelKey
	box  transport.PartitionID
	quit chan struct{}
	once sync.Once
	acks ackBatch
}

// ackBatch collects the acknowledgements of local deliveries (the receiving
// job's Acks, a run of ids per call, which must not block) and applies them to
// the box in batches on the channel's goroutine: acknowledging in the box
// one id at a time cost a copy of the box's remaining entries per id (half
// of a worker's CPU in the first profile). Any attachment of the box takes
// them (acknowledgements are by id).
type ackBatch struct {
	mu   sync.Mutex
	ids  []msgid.ID
	att  transport.Receiver
	wake chan struct{}
}

// addAcked takes a run of acknowledgements (the channel's transport.AckHook).
func (a *ackBatch) addAcked(acks []transport.Acked) {
	a.mu.Lock()
	for _, x := range acks {
		a.ids = append(a.ids, x.ID)
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *ackBatch) setAttachment(att transport.Receiver) {
	a.mu.Lock()
	a.att = att
	a.mu.Unlock()
}

// flush applies the collected acknowledgements.
func (a *ackBatch) flush() {
	a.mu.Lock()
	ids, att := a.ids, a.att
	a.ids = nil
	a.mu.Unlock()
	if len(ids) > 0 && att != nil {
		att.Ack(ids...)
	}
}

// runAcks flushes acknowledgements until the channel stops.
func (c *channel) runAcks() {
	for {
		select {
		case <-c.quit:
			c.acks.flush()
			return
		case <-c.acks.wake:
			c.acks.flush()
		}
	}
}

// channel returns the channel of k, starting its forwarder (nil once the
// node is closed).
func (n *Node) channel(k channelKey) *channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	c, ok := n.channels[k]
	if !ok {
		c = &channel{n: n, key: k, box: channelBox(k), quit: make(chan struct{}), acks: ackBatch{wake: make(chan struct{}, 1)}}
		n.channels[k] = c
		go c.run()
		go c.runAcks()
	}
	return c
}

func (c *channel) stop() { c.once.Do(func() { close(c.quit) }) }

// stopped reports whether the channel was stopped.
func (c *channel) stopped() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// resolve returns the channel's target and the change signal to wait on.
func (c *channel) resolve() (target, bool, <-chan struct{}) {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.resolveLocked(c.key.to)
	return t, ok, n.changed
}

func (c *channel) run() {
	for {
		t, ok, changed := c.resolve()
		if !ok {
			select {
			case <-c.quit:
				return
			case <-changed:
			}
			continue
		}
		att := c.n.out.Attach(c.box)
		c.acks.setAttachment(att)
		var code byte
		if t.local {
			code = c.deliverLocal(att, t)
		} else {
			code = c.deliverRemote(att, t)
		}
		switch code {
		case stopped:
			return
		case replyFenced:
			c.n.cfg.Logf("remote: channel %s is fenced; it stops", c.box)
			return // a superseded life: its replacement sends from its outbox
		}
		c.n.mu.Lock()
		c.n.stats.Retried++
		c.n.mu.Unlock()
		tm := time.NewTimer(retryBackoff)
		select {
		case <-c.quit:
			tm.Stop()
			return
		case <-tm.C:
		}
	}
}

// current reports whether t is still the channel's target.
func (c *channel) current(t target) bool {
	now, ok, _ := c.resolve()
	return ok && now == t
}

// next waits for the box's next batch for target t. It returns nil and the
// code to return when the channel must stop (quit), the target changed
// (replyRetry) or the stream ended (end, if not nil), and otherwise the
// batch with the change signal that was current when it was fetched.
func (c *channel) next(att transport.Receiver, t target, end <-chan byte) ([]transport.Delivery, <-chan struct{}, byte) {
	for {
		_, _, changed := c.resolve()
		if !c.current(t) {
			return nil, nil, replyRetry
		}
		if ds := att.Fetch(frameRows, frameBytes); len(ds) > 0 {
			return ds, changed, 0
		}
		select {
		case <-c.quit:
			return nil, nil, stopped
		case code := <-end:
			return nil, nil, code
		case <-changed:
		case <-att.Notify():
		}
	}
}

// deliverLocal hands the box's messages to a receiving life on this node.
// It returns when the target changes (replyRetry) or the sender is fenced.
// Each fetched batch is admitted once (Node.admit) and offered as one batch
// under the admission's sender token, with the channel's hook (its
// acknowledgements come back a run at a time); a full mailbox takes a
// prefix, and the rest waits for room and is admitted again.
func (c *channel) deliverLocal(att transport.Receiver, t target) byte {
	hook := transport.NewAckHook(c.acks.addAcked)
	box := mailbox(c.key.to, t.lease)
	// A life that ends while a batch is offered has its mailbox dropped
	// (JobEnded); an offer after the drop makes a new, orphaned one, which
	// this drops again.
	defer func() {
		if !c.n.runsHere(c.key.to, t.lease) {
			c.n.in.Drop(box)
		}
	}()
	var offers []transport.Offer
	for {
		ds, changed, code := c.next(att, t, nil)
		if ds == nil {
			return code
		}
		offers = offers[:0]
		for _, d := range ds {
			offers = append(offers, transport.Offer{Msg: d.Msg, Size: tables.SizeOr(d.Size, d.Msg), MaybeDup: d.MaybeDuplicate, Origin: d.Origin})
		}
		rest := offers
		for len(rest) > 0 {
			reg, code, _ := c.n.admit(c.key.from, c.key.fromLease, c.key.to, t.lease, ds[0].Ordered)
			if code != replyAck {
				return code
			}
			rest = rest[c.n.in.OfferBatch(reg.tok, box, rest, hook):]
			if len(rest) == 0 {
				break
			}
			select {
			case <-c.quit:
				return stopped
			case <-changed:
				if !c.current(t) {
					return replyRetry
				}
				_, _, changed = c.resolve()
			case <-c.n.in.Ready(box):
			}
		}
		clear(offers)
	}
}

var pushDesc = grpc.StreamDesc{StreamName: "Push", ServerStreams: true, ClientStreams: true}

// deliverRemote pushes the box's messages to a receiving life on another
// worker over one stream, until the target changes, the stream breaks or
// the receiver says retry or fenced.
func (c *channel) deliverRemote(att transport.Receiver, t target) byte {
	conn, err := c.n.conn(t.addr)
	if err != nil {
		c.n.cfg.Logf("remote: dial %s: %v", t.addr, err)
		return replyRetry
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seq := c.n.streamSeq.Add(1)
	s, err := conn.NewStream(metadata.AppendToOutgoingContext(ctx, streamSeqKey, strconv.FormatUint(seq, 10)), &pushDesc, "/weir.Transport/Push")
	if err != nil {
		return replyRetry
	}
	c.n.mu.Lock()
	c.n.stats.Reconnects++
	c.n.mu.Unlock()
	var lastAck atomic.Int64 // unix nanoseconds
	lastAck.Store(time.Now().UnixNano())
	go c.watch(ctx, cancel, att, &lastAck)
	end := make(chan byte, 1)
	go func() {
		for {
			var a ackFrame
			if err := s.RecvMsg(&a); err != nil {
				end <- replyRetry
				return
			}
			switch a.Code {
			case replyAck:
				lastAck.Store(time.Now().UnixNano())
				att.Ack(a.IDs...)
				c.n.mu.Lock()
				c.n.stats.Acked += uint64(len(a.IDs))
				c.n.mu.Unlock()
			default:
				if a.Reason != "" {
					c.n.cfg.Logf("remote: %s → %s: %s", c.box, t.addr, a.Reason)
				}
				end <- a.Code
				return
			}
		}
	}()
	for {
		ds, changed, code := c.next(att, t, end)
		if ds == nil {
			return code
		}
		f := &pushFrame{From: c.key.from, FromLease: c.key.fromLease, To: c.key.to, ToLease: t.lease, Msgs: make([]pushed, len(ds))}
		for i, d := range ds {
			f.Msgs[i] = pushed{Msg: d.Msg, Size: tables.SizeOr(d.Size, d.Msg), MaybeDup: d.MaybeDuplicate, Ordered: d.Ordered, Origin: d.Origin}
		}
		// SendMsg blocks while the receiver's flow-control window is full:
		// a slow receiver backpressures this channel, whose box then fills
		// and refuses the sending job's offers.
		sent := make(chan error, 1)
		go func() { sent <- s.SendMsg(f) }()
		if code, ok := c.awaitSent(t, sent, end, changed); !ok {
			return code
		}
		c.n.mu.Lock()
		c.n.stats.Pushed += uint64(len(ds))
		c.n.mu.Unlock()
	}
}

// watch ends a push stream (cancel) whose sent messages stay
// unacknowledged, with no acknowledgement at all, for the node's
// AckTimeout: the channel then sends everything unacknowledged again on a
// new stream, marked maybe-duplicate (the box's new attachment marks what
// the old one fetched), and the receiver acknowledges what it had already
// processed when it finds it in its dedup. A connection that went silent
// is found sooner by the client's keepalive; this catches acknowledgements
// lost while the connection lives — a stream the receiver no longer
// answers on, which is what item 5 of issue 23 was (the receiving side
// answered on an older stream; see inChannel).
//
// It waits for silence, not for the age of the oldest message: a slow
// receiver with a full mailbox still acknowledges something now and then,
// and sending it its backlog again would only slow it more. Messages
// fetched but held back by flow control count as sent: a receiver that
// has not acknowledged anything for AckTimeout with its mailbox full gets
// a new stream too, which costs it one re-offer of each buffered message.
func (c *channel) watch(ctx context.Context, cancel context.CancelFunc, att transport.Receiver, lastAck *atomic.Int64) {
	d := c.n.cfg.AckTimeout
	if d < 0 {
		return
	}
	tick := time.NewTicker(max(d/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if att.Pending() <= att.Available() {
				lastAck.Store(now.UnixNano()) // nothing sent is unacknowledged
				continue
			}
			if now.Sub(time.Unix(0, lastAck.Load())) < d {
				continue
			}
			c.n.cfg.Logf("remote: channel %s: no acknowledgement for %v with messages unacknowledged; sending them again on a new stream", c.box, d)
			c.n.mu.Lock()
			c.n.stats.Resent++
			c.n.mu.Unlock()
			cancel()
			return
		}
	}
}

// awaitSent waits for a frame's SendMsg; ok false (with the code to
// return) when the channel must stop or deliver elsewhere first.
func (c *channel) awaitSent(t target, sent <-chan error, end <-chan byte, changed <-chan struct{}) (byte, bool) {
	for {
		select {
		case err := <-sent:
			return replyRetry, err == nil
		case <-c.quit:
			return stopped, false
		case code := <-end:
			return code, false
		case <-changed:
			if !c.current(t) {
				return replyRetry, false
			}
			_, _, changed = c.resolve()
		}
	}
}

// conn returns the cached client connection to addr.
func (n *Node) conn(addr string) (grpc.ClientConnInterface, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.conns[addr]; ok {
		return c, nil
	}
	c, err := n.cfg.Dial(addr)
	if err != nil {
		return nil, err
	}
	n.conns[addr] = c
	return c, nil
}
