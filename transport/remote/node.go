package remote

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Route says where a partition's current job runs: the worker's transport
// address and the job's lease (each job life of a partition has its own,
// larger than every earlier one's).
type Route struct {
	Partition transport.PartitionID `json:"partition"`
	Worker    string                `json:"worker"`
	Addr      string                `json:"addr"`
	Lease     store.LeaseID         `json:"lease"`
}

// Config configures a Node.
type Config struct {
	// Worker is this node's worker id; Addr its transport address.
	Worker, Addr string
	// BufferBytes bounds each mailbox and each outgoing channel (0: the
	// transport's default).
	BufferBytes int
	// Dial returns a client connection to a peer's address (wire.Security.Dial).
	Dial func(addr string) (grpc.ClientConnInterface, error)
	// Logf receives the node's log lines (nil: discard).
	Logf func(format string, args ...any)
	// AckTimeout: a channel whose stream leaves sent messages
	// unacknowledged, with no acknowledgement at all, for this long sends
	// everything unacknowledged again on a new stream, marked
	// maybe-duplicate (0: DefaultAckTimeout; negative: never). See
	// channel.watch.
	AckTimeout time.Duration
}

// DefaultAckTimeout is the default Config.AckTimeout: well above a
// receiving job's commit interval, so that a slow receiver is not sent its
// backlog again, and below the minutes after which a stalled channel would
// be taken for a hung pipeline.
const DefaultAckTimeout = 30 * time.Second

// Node is one worker process's network transport. See the package comment.
type Node struct {
	cfg Config
	// out holds the outgoing channel boxes, keyed channelBox(from, lease,
	// to); jobs offer into them under their own sender tokens (fenced by
	// out's sender fence per sending partition).
	out *transport.Hub
	// in holds the receiving jobs' mailboxes, keyed mailbox(to, lease);
	// only the node offers into them, under one token per remote sending
	// partition and lease (fenced by in's sender fence).
	in *transport.Hub

	mu     sync.Mutex
	routes map[transport.PartitionID]Route
	local  map[transport.PartitionID]store.LeaseID // jobs running here
	// floor: no life of a sending partition below this lease is admitted
	// (FenceBelow).
	floor    map[transport.PartitionID]store.LeaseID
	senders  map[transport.PartitionID]senderReg // in's registered sender tokens
	channels map[channelKey]*channel
	conns    map[string]grpc.ClientConnInterface
	// changed is closed (and replaced) whenever routes or local jobs
	// change: waiting forwarders look again.
	changed chan struct{}
	closed  bool
	stats   Stats
	// inChannels are the receiving sides of the channels pushed here
	// (service.go): the newest stream of each wins.
	inChannels map[inKey]*inChannel

	// streamSeq numbers the push streams this node opens (increasing,
	// from the clock at start, so also across restarts).
	streamSeq atomic.Uint64
	streams   atomic.Int64  // push streams served now
	received  atomic.Uint64 // messages pushed here and taken into a mailbox
}

// Stats counts what a node did, for tests and status. Pushed, Acked,
// Reconnects and Resent count as a sender (Resent: streams restarted for
// AckTimeout); Received, Superseded (push streams ended because a newer
// stream of their channel arrived) and Streams (push streams served now) as
// a receiver.
type Stats struct {
	Pushed, Acked, Fenced, Retried, Reconnects, Resent uint64
	Received, Superseded                               uint64
	Streams                                            int64
}

type senderReg struct {
	lease store.LeaseID
	tok   transport.SenderToken
}

// NewNode returns a node with no routes.
func NewNode(cfg Config) *Node {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	n := &Node{cfg: cfg, out: transport.NewHub(cfg.BufferBytes), in: transport.NewHub(cfg.BufferBytes),
		routes: map[transport.PartitionID]Route{}, local: map[transport.PartitionID]store.LeaseID{}, floor: map[transport.PartitionID]store.LeaseID{},
		senders: map[transport.PartitionID]senderReg{}, channels: map[channelKey]*channel{},
		conns: map[string]grpc.ClientConnInterface{}, changed: make(chan struct{}), inChannels: map[inKey]*inChannel{}}
	n.streamSeq.Store(uint64(time.Now().UnixNano()))
	return n
}

// SetRowLimit bounds every buffer of the node, the mailboxes of its jobs
// and its outgoing channels, to rows messages as well as to their bytes
// (transport.Hub.SetRowLimit).
func (n *Node) SetRowLimit(rows int) {
	n.in.SetRowLimit(rows)
	n.out.SetRowLimit(rows)
}

// Stats returns a copy of the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	st := n.stats
	n.mu.Unlock()
	st.Received, st.Streams = n.received.Load(), n.streams.Load()
	return st
}

func mailbox(p transport.PartitionID, lease store.LeaseID) transport.PartitionID {
	return transport.PartitionID(fmt.Sprintf("%s#%d", p, lease))
}

// SetRoutes replaces the routing table (the active controller's, carried by
// its heartbeat). Entries for partitions running here with a newer lease
// than the table's are kept local.
func (n *Node) SetRoutes(rs []Route) {
	m := make(map[transport.PartitionID]Route, len(rs))
	for _, r := range rs {
		m[r.Partition] = r
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.routes = m
	n.changedLocked()
}

// changedLocked wakes every forwarder waiting for a change. REQUIRES: n.mu.
func (n *Node) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// JobStarted records that a job of partition p with lease runs here: its
// mailbox accepts deliveries addressed to that life. Call it before the
// job starts.
func (n *Node) JobStarted(p transport.PartitionID, lease store.LeaseID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if lease > n.local[p] {
		n.local[p] = lease
	}
	n.changedLocked()
}

// JobEnded records that the job of p with lease has exited: its mailbox is
// dropped (senders send its unacknowledged messages again to the next
// life) and its outgoing channels stop (the next life sends from its
// outbox).
func (n *Node) JobEnded(p transport.PartitionID, lease store.LeaseID) {
	n.mu.Lock()
	if n.local[p] == lease {
		delete(n.local, p)
	}
	n.forgetInLocked(func(k inKey) bool { return k.to == p && k.toLease == lease })
	var stop []*channel
	for k, c := range n.channels {
		if k.from == p && k.fromLease == lease {
			stop = append(stop, c)
			delete(n.channels, k)
		}
	}
	n.changedLocked()
	n.mu.Unlock()
	n.in.Drop(mailbox(p, lease))
	for _, c := range stop {
		c.stop()
		n.out.Drop(c.box)
	}
}

// Close stops every forwarder.
func (n *Node) Close() {
	n.mu.Lock()
	n.closed = true
	var stop []*channel
	for k, c := range n.channels {
		stop = append(stop, c)
		delete(n.channels, k)
	}
	n.changedLocked()
	n.mu.Unlock()
	for _, c := range stop {
		c.stop()
	}
}

// target is where a channel delivers: the newest known life of the
// receiving partition, here or on another worker.
type target struct {
	lease store.LeaseID
	local bool
	addr  string
}

// resolve returns the newest known life of p. REQUIRES: n.mu held.
func (n *Node) resolveLocked(p transport.PartitionID) (target, bool) {
	r, routed := n.routes[p]
	l, here := n.local[p]
	switch {
	case here && (!routed || l >= r.Lease):
		return target{lease: l, local: true}, true
	case routed && (r.Worker == n.cfg.Worker || r.Addr == n.cfg.Addr):
		// Routed here, but the job has not started (or has ended): wait.
		return target{}, false
	case routed:
		return target{lease: r.Lease, addr: r.Addr}, true
	}
	return target{}, false
}

// knownLeaseLocked is the newest lease this node knows for partition p.
// REQUIRES: n.mu held.
func (n *Node) knownLeaseLocked(p transport.PartitionID) store.LeaseID {
	return max(n.routes[p].Lease, n.local[p], n.floor[p])
}

// FenceBelow makes the node refuse every life of sending partition p with
// a lease below lease, whatever its routes say (they may lag a heartbeat
// behind): a rescaled computation's new job is started with the leases of
// its upstream partitions' new lives, so that a stopped life that routed
// by the old layout cannot deliver to it (controller/rescale.go).
func (n *Node) FenceBelow(p transport.PartitionID, lease store.LeaseID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if lease > n.floor[p] {
		n.floor[p] = lease
	}
}

// deliver offers messages of channel from(fromLease) → to(toLease) into
// to's mailbox here, box (mailbox(to, toLease), named once by the caller:
// formatting it per message cost 5% of a worker's CPU), as one batch with
// hook, and returns how many the mailbox took (a prefix). code is replyAck
// when it took them all (hook runs once the receiving job acknowledges
// them), replyRetry when the mailbox is full (wait on room and deliver the
// rest) or the life is unknown here, and replyFenced when the sending life
// is superseded. ordered is the sending life's promise (Delivery.Ordered).
func (n *Node) deliver(from transport.PartitionID, fromLease store.LeaseID, to transport.PartitionID, toLease store.LeaseID, box transport.PartitionID,
	offers []transport.Offer, hook *transport.AckHook, ordered bool) (taken int, code byte, room <-chan struct{}, reason string) {
	reg, code, reason := n.admit(from, fromLease, to, toLease, ordered)
	if code != replyAck {
		return 0, code, nil, reason
	}
	if taken = n.in.OfferBatch(reg.tok, box, offers, hook); taken < len(offers) {
		return taken, replyRetry, n.in.Ready(box), ""
	}
	return taken, replyAck, nil, ""
}

// admit checks that the channel from(fromLease) → to(toLease) may offer
// into to's mailbox here — the receiving life runs here and the sending
// life is the newest known of its partition — and returns the in hub's
// sender registration to offer under (replyAck), or replyRetry or
// replyFenced with the reason. Offers after it under reg.tok are fenced
// by the in hub once a newer life of from registers, so a batch of offers
// may share one admission.
func (n *Node) admit(from transport.PartitionID, fromLease store.LeaseID, to transport.PartitionID, toLease store.LeaseID, ordered bool) (senderReg, byte, string) {
	n.mu.Lock()
	if n.local[to] != toLease {
		n.mu.Unlock()
		return senderReg{}, replyRetry, fmt.Sprintf("%s#%d does not run here", to, toLease)
	}
	known := n.knownLeaseLocked(from)
	switch {
	case fromLease < known:
		n.stats.Fenced++
		n.mu.Unlock()
		return senderReg{}, replyFenced, fmt.Sprintf("%s#%d is superseded by lease %d", from, fromLease, known)
	case fromLease > known:
		n.mu.Unlock()
		return senderReg{}, replyRetry, fmt.Sprintf("lease %d of %s is not known here yet", fromLease, from)
	}
	reg, ok := n.senders[from]
	n.mu.Unlock()
	if !ok || reg.lease < fromLease {
		reg = n.register(from, fromLease, ordered)
	}
	if reg.lease != fromLease {
		return senderReg{}, replyFenced, fmt.Sprintf("%s#%d is superseded by lease %d", from, fromLease, reg.lease)
	}
	return reg, replyAck, ""
}

// runsHere reports whether the life of p with lease runs here.
func (n *Node) runsHere(p transport.PartitionID, lease store.LeaseID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.local[p] == lease
}

// register makes lease the sender of partition from in the in hub (unless
// a newer one is registered): RegisterSender waits for the offers in flight
// under the previous lease's token and fences them. The token carries the
// sending life's ordered promise, so that deliveries name their sender and
// its order as the in-process hub's do.
func (n *Node) register(from transport.PartitionID, lease store.LeaseID, ordered bool) senderReg {
	n.mu.Lock()
	defer n.mu.Unlock()
	if reg, ok := n.senders[from]; ok && reg.lease >= lease {
		return reg
	}
	reg := senderReg{lease: lease, tok: n.in.RegisterSender(from, ordered)}
	n.senders[from] = reg
	n.forgetInLocked(func(k inKey) bool { return k.from == from && k.fromLease < lease })
	return reg
}

// Endpoint returns the transport of one job: partition p's life with lease.
func (n *Node) Endpoint(p transport.PartitionID, lease store.LeaseID) *Endpoint {
	return &Endpoint{n: n, part: p, lease: lease, chans: map[transport.PartitionID]*channel{}}
}

// Endpoint is one job's view of the node (job.Transport): it offers as its
// partition's life into outgoing channels and receives from its life's
// mailbox.
type Endpoint struct {
	n     *Node
	part  transport.PartitionID
	lease store.LeaseID

	// chans are this life's channels by receiving partition: looked up
	// here at every offer rather than in the node's table (under the
	// node's lock, shared by every job of the worker). A life's channels
	// stop only when it ended (JobEnded) or the node closed.
	mu    sync.Mutex
	chans map[transport.PartitionID]*channel
}

// channel returns the life's channel to p (nil once the node is closed).
func (e *Endpoint) channel(p transport.PartitionID) *channel {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.chans[p]
	if c == nil || c.stopped() {
		if c = e.n.channel(channelKey{from: e.part, fromLease: e.lease, to: p}); c != nil {
			e.chans[p] = c
		}
	}
	return c
}

// RegisterSender fences earlier lives of the partition on this node; the
// token's ordered promise travels with every message (Delivery.Ordered).
func (e *Endpoint) RegisterSender(p transport.PartitionID, ordered bool) transport.SenderToken {
	return e.n.out.RegisterSender(p, ordered)
}

// OfferBatch queues offers on the channel to partition p and returns how
// many it took: a prefix, up to the first offer that does not fit the
// channel's bound on unacknowledged bytes (backpressure, see Ready).
func (e *Endpoint) OfferBatch(from transport.SenderToken, p transport.PartitionID, offers []transport.Offer, ack *transport.AckHook) int {
	c := e.channel(p)
	if c == nil {
		return len(offers) // the node is closed: dropped, never acknowledged
	}
	return e.n.out.OfferBatch(from, c.box, offers, ack)
}

// Ready is signalled when the channel to p gains room.
func (e *Endpoint) Ready(p transport.PartitionID) <-chan struct{} {
	if c := e.channel(p); c != nil {
		return e.n.out.Ready(c.box)
	}
	return e.n.out.Ready(channelBox(channelKey{from: e.part, fromLease: e.lease, to: p}))
}

// Attach attaches to this life's mailbox.
func (e *Endpoint) Attach(p transport.PartitionID) transport.Receiver {
	return e.n.in.Attach(mailbox(p, e.lease))
}
