package remote

// The tests of this file break the network between a sender and a
// receiver silently (faultProxy) and check that every acknowledgement
// still reaches the sender and nothing is delivered twice unmarked: the
// server ends a silent stream on its own (keepalive), the newest stream of
// a channel takes over the older one's acknowledgements, and a channel
// re-sends what its stream leaves unacknowledged for too long.

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/wire"
)

// bigMsg is message i with a payload of about size bytes.
func bigMsg(i, size int) *weir.Message {
	m := msg(i)
	m.Payload["pad"] = strings.Repeat("x", size)
	return m
}

// proxied returns a sending node a whose pushes to b go through a fault
// proxy; b's mailboxes hold mailboxMsgs messages of bigMsg(_, 1000).
func proxiedNodes(t *testing.T, mailboxMsgs int, acfg Config, bextra ...grpc.ServerOption) (a, b *testNode, p *faultProxy) {
	t.Helper()
	sec := wire.Security{}
	b = newTestNodeWith(t, Config{Worker: "b", BufferBytes: mailboxMsgs * tables.MessageSize(bigMsg(0, 1000))}, sec, bextra...)
	p = newFaultProxy(t, b.addr)
	acfg.Worker = "a"
	acfg.Dial = func(string) (grpc.ClientConnInterface, error) { return sec.Dial(p.addr()) }
	a = newTestNodeWith(t, acfg, sec)
	return a, b, p
}

// delivered records what a receiver fetched, and fails the test at once
// if a message is delivered again unmarked: an unmarked delivery promises
// the receiver it may skip its dedup (transport.Delivery), so a second
// copy of it would be processed twice.
type delivered struct {
	t     *testing.T
	times map[msgid.ID]int
	// marked counts the deliveries marked maybe-duplicate.
	marked int
}

func newDelivered(t *testing.T) *delivered {
	return &delivered{t: t, times: map[msgid.ID]int{}}
}

func (d *delivered) add(x transport.Delivery) {
	d.t.Helper()
	id := x.Msg.ID
	if d.times[id] > 0 && !x.MaybeDuplicate {
		d.t.Fatalf("%s delivered again (copy %d), not marked maybe-duplicate: the receiver would process it twice", id, d.times[id]+1)
	}
	if x.MaybeDuplicate {
		d.marked++
	}
	d.times[id]++
}

// drain fetches one message at a time from r and acknowledges it, until
// the sender heard n acknowledgements or the bound d passed. After each
// acknowledgement it waits (up to 50 ms) until settled reports true, if
// settled is not nil.
func drain(t *testing.T, r transport.Receiver, rec *delivered, ak *acks, n int, d time.Duration, settled func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for ak.count() < n && time.Now().Before(deadline) {
		ds := r.Fetch(1, 1<<30)
		if len(ds) == 0 {
			select {
			case <-r.Notify():
			case <-ak.ch:
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		rec.add(ds[0])
		r.Ack(ds[0].Msg.ID)
		for wait := time.Now().Add(50 * time.Millisecond); settled != nil && !settled() && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSilentBreakAcksReachSender is item 5 of issue 23. The receiver's
// mailbox is full, so the server's handler of the channel's stream waits
// for room with pushed messages in hand; the network goes silent; the
// client learns it (its keepalive, here the proxy closing the client's
// end) and re-sends everything on a new stream, whose handler also waits
// for room; the old server side hears nothing. Then the receiver drains,
// one message at a time. Every acknowledgement must reach the sender's
// hooks within a bound, and nothing may be lost or delivered twice
// unmarked: the old stream's handler must neither take over the ack hooks
// of messages the new stream offered (their acknowledgements would go to
// a stream that can never reach the sender: its outputs would never be
// erased, a stop would never drain) nor offer, unmarked, a message the
// receiver has processed and acknowledged meanwhile.
func TestSilentBreakAcksReachSender(t *testing.T) {
	const size, mailboxMsgs, n = 1000, 8, 40
	a, b, p := proxiedNodes(t, mailboxMsgs, Config{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	for i := range n {
		if !offerOne(se, tok, recvP, bigMsg(i, size), size, ak.hook, false) {
			t.Fatalf("offer %d refused", i)
		}
	}
	box := mailbox(recvP, 20)
	waitFor(t, "a full mailbox and every message pushed", func() bool {
		return b.in.Pending(box) == mailboxMsgs && a.Stats().Pushed >= n
	})
	p.cutClient()
	// The new stream's handler re-offered what the mailbox holds and waits
	// for room.
	waitFor(t, "the sender to reconnect and re-offer the mailbox's messages", func() bool {
		return a.Stats().Pushed >= 2*n && b.Stats().Received >= 2*mailboxMsgs
	})

	// Each acknowledgement makes room for one message: the receiver waits
	// for a handler to fill it before it acknowledges the next, so that
	// the handlers waiting for room take turns (as they would with any
	// receiver slower than the network) instead of racing.
	rec := newDelivered(t)
	drain(t, re.Attach(recvP), rec, ak, n, 10*time.Second, func() bool { return b.in.Pending(box) == mailboxMsgs })
	if got := ak.count(); got < n {
		var missing []msgid.ID
		for i := range n {
			if id := msg(i).ID; ak.got[id] == 0 {
				missing = append(missing, id)
			}
		}
		t.Fatalf("the sender heard %d of %d acknowledgements within 10 s after the receiver drained; never acknowledged to it: %v", got, n, missing)
	}
	if len(rec.times) != n {
		t.Fatalf("%d distinct messages delivered, want %d", len(rec.times), n)
	}
}

// TestSilentPeerStreamEnds: when the network to a sender goes silent
// (nothing closed, nothing arriving either way), the receiver's server ends
// the sender's push stream on its own — its keepalive (wire) finds the
// client gone — well before the client's own keepalive (10 to 12 s) could
// reconnect and supersede it. Without a server keepalive the handler would
// wait for the client for hours.
func TestSilentPeerStreamEnds(t *testing.T) {
	a, b, p := proxiedNodes(t, 8, Config{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	offerOne(se, tok, recvP, msg(0), 64, ak.hook, false)
	receive(t, re.Attach(recvP), 1)
	waitFor(t, "the acknowledgement", func() bool { return ak.count() == 1 })
	if n := b.Stats().Streams; n != 1 {
		t.Fatalf("the receiver serves %d push streams, want 1", n)
	}
	p.silence()
	start := time.Now()
	within(t, 9*time.Second, "the receiver's server to end the silent push stream", func() bool { return b.Stats().Streams == 0 })
	t.Logf("the silent stream ended after %v", time.Since(start).Round(100*time.Millisecond))
}

// dropAcksOfFirstStream is a server interceptor (a test double) that makes
// the first push stream swallow the acknowledgements it sends: the stream
// and its connection stay healthy, but its sender never hears of them.
func dropAcksOfFirstStream() grpc.ServerOption {
	var first atomic.Bool
	return grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if first.CompareAndSwap(false, true) {
			ss = ackDropper{ss}
		}
		return h(srv, ss)
	})
}

type ackDropper struct{ grpc.ServerStream }

func (d ackDropper) SendMsg(m any) error {
	if a, ok := m.(*ackFrame); ok && a.Code == replyAck {
		return nil
	}
	return d.ServerStream.SendMsg(m)
}

// TestUnacknowledgedResent: a stream on which the sender hears no
// acknowledgement for its AckTimeout while messages it sent are
// unacknowledged is replaced: the channel sends them again on a new
// stream, marked maybe-duplicate, and the receiver's acknowledgements of
// the copies reach the sender. Nothing is delivered twice unmarked.
func TestUnacknowledgedResent(t *testing.T) {
	const n = 20
	a, b, _ := proxiedNodes(t, 1000, Config{AckTimeout: 200 * time.Millisecond}, dropAcksOfFirstStream())
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	for i := range n {
		offerOne(se, tok, recvP, msg(i), 64, ak.hook, false)
	}
	rec := newDelivered(t)
	drain(t, re.Attach(recvP), rec, ak, n, 5*time.Second, nil)
	if got := ak.count(); got < n {
		t.Fatalf("the sender heard %d of %d acknowledgements within 5 s (AckTimeout 200 ms); resent streams: %d", got, n, a.Stats().Resent)
	}
	if len(rec.times) != n || rec.marked == 0 {
		t.Fatalf("%d distinct messages delivered, %d copies marked maybe-duplicate; want %d and the copies of the re-send", len(rec.times), rec.marked, n)
	}
	if a.Stats().Resent == 0 {
		t.Fatal("the acknowledgements arrived without a re-send")
	}
}

// TestLateStreamDoesNotWin: a stream of a channel that arrives after a
// newer one (a lower sequence number: its frames were delayed in the
// network) is refused, so it can neither take the acknowledgements nor
// offer its stale copies; a newer stream takes over.
func TestLateStreamDoesNotWin(t *testing.T) {
	n := NewNode(Config{Worker: "b"})
	k := inKey{from: sendP, to: recvP, fromLease: 10, toLease: 20}
	if ic, _ := n.claim(k, &inStream{seq: 1}); ic != nil {
		t.Fatal("a stream to a life that does not run here claimed a channel")
	}
	n.JobStarted(recvP, 20)
	stream := func(seq uint64) *inStream {
		return &inStream{seq: seq, acks: newAckQueue(), gone: make(chan struct{})}
	}
	s5, s3, s6 := stream(5), stream(3), stream(6)
	ic, _ := n.claim(k, s5)
	if ic == nil {
		t.Fatal("the first stream was refused")
	}
	if ic, _ := n.claim(k, s3); ic != nil {
		t.Fatal("a late, older stream took over the channel")
	}
	ic.hook.Acked(transport.Acked{ID: "m1"})
	if got := s5.acks.take(); len(got) != 1 {
		t.Fatalf("the newest stream got acknowledgements %v, want [m1]", got)
	}
	ic.release(s5)
	ic.hook.Acked(transport.Acked{ID: "m2"}) // no stream open: waits for the next
	if ic, _ := n.claim(k, s3); ic != nil {
		t.Fatal("a late, older stream took over the channel after the newest ended")
	}
	if got, _ := n.claim(k, s6); got != ic {
		t.Fatal("a newer stream was refused")
	}
	if got := s6.acks.take(); len(got) != 1 || got[0] != "m2" {
		t.Fatalf("the new stream got acknowledgements %v, want [m2] made while none was open", got)
	}
	if _, code, _, _ := ic.deliver(n, s5, k, []pushed{{Msg: msg(1)}}); code != superseded {
		t.Fatalf("an offer of a superseded stream returned %d", code)
	}
	n.JobEnded(recvP, 20)
	if len(n.inChannels) != 0 {
		t.Fatal("the receiving side of a channel outlived its receiving life")
	}
}
