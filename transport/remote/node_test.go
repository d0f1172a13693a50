package remote

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/wire"
)

// testNode is a node served on a loopback gRPC server.
type testNode struct {
	*Node
	addr  string
	srv   *grpc.Server
	extra []grpc.ServerOption
}

func newTestNode(t *testing.T, id string, bufferBytes int, sec wire.Security) *testNode {
	t.Helper()
	return newTestNodeWith(t, Config{Worker: id, BufferBytes: bufferBytes}, sec)
}

// newTestNodeWith serves a node of cfg (its Addr, Logf and, if nil, Dial
// filled in) with sec's server options and extra ones (test doubles).
func newTestNodeWith(t *testing.T, cfg Config, sec wire.Security, extra ...grpc.ServerOption) *testNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{addr: ln.Addr().String(), extra: extra}
	cfg.Addr, cfg.Logf = tn.addr, t.Logf
	if cfg.Dial == nil {
		cfg.Dial = func(addr string) (grpc.ClientConnInterface, error) { return sec.Dial(addr) }
	}
	tn.Node = NewNode(cfg)
	tn.serve(t, ln, sec)
	t.Cleanup(func() { tn.Close(); tn.srv.Stop() })
	return tn
}

func (tn *testNode) serve(t *testing.T, ln net.Listener, sec wire.Security) {
	t.Helper()
	opts, err := sec.ServerOptions()
	if err != nil {
		t.Fatal(err)
	}
	tn.srv = grpc.NewServer(append(opts, tn.extra...)...)
	tn.Register(tn.srv)
	go tn.srv.Serve(ln)
}

// restart stops the node's server (every stream breaks) and serves the
// same node on the same address again.
func (tn *testNode) restart(t *testing.T, sec wire.Security) {
	t.Helper()
	tn.srv.Stop()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ {
		if ln, err = net.Listen("tcp", tn.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	tn.serve(t, ln, sec)
}

// acks records the sender's acknowledgement hook calls.
type acks struct {
	mu  sync.Mutex
	got map[msgid.ID]int
	ch  chan struct{}
}

func newAcks() *acks { return &acks{got: map[msgid.ID]int{}, ch: make(chan struct{}, 1)} }

func (a *acks) hook(id msgid.ID) {
	a.mu.Lock()
	a.got[id]++
	a.mu.Unlock()
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got)
}

// waitFor polls cond (a hang guard for a failing test, not a timing
// assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	within(t, 20*time.Second, what, cond)
}

// within polls cond for at most d (a bound the test asserts).
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// offerOne offers msg alone, as a one-message OfferBatch, and reports
// whether s took it. ack, if not nil, is told msg's id once it is
// acknowledged: each call makes a hook of its own, so a later offer of the
// same id replaces it (the newest offer's hook is the one told).
func offerOne(s transport.Sender, from transport.SenderToken, p transport.PartitionID, msg *weir.Message, size int, ack func(msgid.ID), maybeDup bool) bool {
	var hook *transport.AckHook
	if ack != nil {
		hook = transport.NewAckHook(func(acks []transport.Acked) {
			for _, a := range acks {
				ack(a.ID)
			}
		})
	}
	return s.OfferBatch(from, p, []transport.Offer{{Msg: msg, Size: size, MaybeDup: maybeDup}}, hook) == 1
}

func msg(i int) *weir.Message {
	return &weir.Message{ID: msgid.ID(fmt.Sprintf("m%05d", i)), Stream: "s", Payload: weir.Row{"i": int64(i)}}
}

// receive fetches n messages from r in order, acknowledging each.
func receive(t *testing.T, r transport.Receiver, n int) []transport.Delivery {
	t.Helper()
	return fetch(t, r, n, true)
}

// fetch fetches n messages from r in order, acknowledging them if ack.
func fetch(t *testing.T, r transport.Receiver, n int, ack bool) []transport.Delivery {
	t.Helper()
	var out []transport.Delivery
	waitFor(t, fmt.Sprintf("%d deliveries", n), func() bool {
		ds := r.Fetch(1000, 1<<30)
		for _, d := range ds {
			if ack {
				r.Ack(d.Msg.ID)
			}
		}
		out = append(out, ds...)
		return len(out) >= n
	})
	return out
}

func routes(rs ...Route) []Route { return rs }

const (
	sendP = transport.PartitionID("S/0")
	recvP = transport.PartitionID("R/0")
)

// pair sets up a sending life of S/0 (lease 10) on a and a receiving life
// of R/0 (lease 20) on b, with both nodes' routes.
func pair(a, b *testNode) (*Endpoint, *Endpoint) {
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "b", Addr: b.addr, Lease: 20})
	a.SetRoutes(rs)
	b.SetRoutes(rs)
	a.JobStarted(sendP, 10)
	b.JobStarted(recvP, 20)
	return a.Endpoint(sendP, 10), b.Endpoint(recvP, 20)
}

// TestPushInOrderWithAcks: messages cross the network in offer order,
// unmarked, naming their sending partition and its ordered promise (as the
// in-process hub's deliveries do), and every acknowledgement reaches the
// sender's hook once.
func TestPushInOrderWithAcks(t *testing.T) {
	a, b := newTestNode(t, "a", 0, wire.Security{}), newTestNode(t, "b", 0, wire.Security{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	const n = 2000
	for i := 0; i < n; i++ {
		if !offerOne(se, tok, recvP, msg(i), 64, ak.hook, false) {
			t.Fatalf("offer %d refused", i)
		}
	}
	ds := receive(t, re.Attach(recvP), n)
	for i, d := range ds {
		if d.Msg.ID != msg(i).ID || d.MaybeDuplicate || d.Msg.Payload["i"] != int64(i) {
			t.Fatalf("delivery %d = %s dup=%v %v, want %s unmarked", i, d.Msg.ID, d.MaybeDuplicate, d.Msg.Payload, msg(i).ID)
		}
		if d.From != sendP || !d.Ordered {
			t.Fatalf("delivery %d names sender %q ordered %v, want %s ordered (the channel's frontier dedup needs both)", i, d.From, d.Ordered, sendP)
		}
	}
	waitFor(t, "acks", func() bool { return ak.count() == n })
	for id, c := range ak.got {
		if c != 1 {
			t.Fatalf("%s acknowledged %d times", id, c)
		}
	}
}

// TestBackpressureOverTheNetwork: a receiver that does not acknowledge
// fills its mailbox, then the sender's channel: offers are refused, and
// Ready fires once the receiver acknowledges.
func TestBackpressureOverTheNetwork(t *testing.T) {
	const bound = 64 << 10
	a, b := newTestNode(t, "a", bound, wire.Security{}), newTestNode(t, "b", bound, wire.Security{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	accepted := 0
	for i := 0; i < 100000 && offerOne(se, tok, recvP, msg(i), 1024, ak.hook, false); i++ {
		accepted++
	}
	if accepted >= 100000 {
		t.Fatal("a receiver that never acknowledges did not stop the sender")
	}
	// The sender's channel holds at most its bound (plus one message).
	if accepted > 2*bound/1024+2 {
		t.Fatalf("%d messages of 1 KiB accepted with bounds of %d bytes", accepted, bound)
	}
	r := re.Attach(recvP)
	room := se.Ready(recvP)
	// The receiving side took each frame into the full mailbox a prefix at
	// a time: the rest waited for room, and nothing was lost or reordered.
	for i, d := range receive(t, r, accepted) {
		if d.Msg.ID != msg(i).ID {
			t.Fatalf("delivery %d is %s, want %s", i, d.Msg.ID, msg(i).ID)
		}
	}
	if hw := b.in.HighWater(mailbox(recvP, 20)); hw > bound+1024 {
		t.Fatalf("receiver mailbox high water %d above its bound %d", hw, bound)
	}
	waitFor(t, "room", func() bool {
		select {
		case <-room:
			return true
		default:
			return false
		}
	})
	if !offerOne(se, tok, recvP, msg(accepted), 1024, ak.hook, false) {
		t.Fatal("offer refused after the receiver acknowledged everything")
	}
}

// TestReconnectResends: the receiver's server dies mid-stream; after it is
// back, every message not acknowledged is sent again, marked
// maybe-duplicate, and nothing is lost.
func TestReconnectResends(t *testing.T) {
	a, b := newTestNode(t, "a", 0, wire.Security{}), newTestNode(t, "b", 0, wire.Security{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	for i := 0; i < 100; i++ {
		offerOne(se, tok, recvP, msg(i), 64, ak.hook, false)
	}
	r := re.Attach(recvP)
	first := fetch(t, r, 100, false)
	// Acknowledge nothing of these; break every stream, and drop what the
	// receiving life buffered (as a receiver restart would).
	b.restart(t, wire.Security{})
	b.JobEnded(recvP, 20)
	b.JobStarted(recvP, 21)
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "b", Addr: b.addr, Lease: 21})
	a.SetRoutes(rs)
	b.SetRoutes(rs)
	for i := 100; i < 150; i++ {
		offerOne(se, tok, recvP, msg(i), 64, ak.hook, false)
	}
	r2 := b.Endpoint(recvP, 21).Attach(recvP)
	again := receive(t, r2, 150)
	seen := map[msgid.ID]bool{}
	for i, d := range again {
		if seen[d.Msg.ID] {
			continue
		}
		seen[d.Msg.ID] = true
		if i < 100 && !d.MaybeDuplicate {
			t.Fatalf("re-sent %s not marked maybe-duplicate", d.Msg.ID)
		}
	}
	if len(seen) != 150 || len(first) != 100 {
		t.Fatalf("%d distinct messages after reconnection, want 150", len(seen))
	}
	waitFor(t, "acks", func() bool { return ak.count() == 150 })
	if a.Stats().Reconnects < 2 {
		t.Fatalf("reconnects = %d", a.Stats().Reconnects)
	}
}

// TestZombieSenderFenced: once the receiver knows a newer lease of the
// sending partition, the old life's pushes are refused (fenced) and none
// of them reaches the mailbox; the new life's are delivered.
func TestZombieSenderFenced(t *testing.T) {
	a, b, c := newTestNode(t, "a", 0, wire.Security{}), newTestNode(t, "b", 0, wire.Security{}), newTestNode(t, "c", 0, wire.Security{})
	zombie, re := pair(a, b)
	ztok := zombie.RegisterSender(sendP, true)
	r := re.Attach(recvP)
	// S/0 moves to c with lease 11; b learns it (c's life is newer).
	rs := routes(Route{Partition: sendP, Worker: "c", Addr: c.addr, Lease: 11}, Route{Partition: recvP, Worker: "b", Addr: b.addr, Lease: 20})
	b.SetRoutes(rs)
	c.SetRoutes(rs)
	c.JobStarted(sendP, 11)
	live := c.Endpoint(sendP, 11)
	ltok := live.RegisterSender(sendP, true)
	ak := newAcks()
	for i := 0; i < 50; i++ {
		offerOne(zombie, ztok, recvP, msg(i), 64, func(msgid.ID) { t.Error("a zombie's message was acknowledged") }, false)
	}
	waitFor(t, "the zombie fenced", func() bool { return b.Stats().Fenced > 0 })
	for i := 1000; i < 1010; i++ {
		offerOne(live, ltok, recvP, msg(i), 64, ak.hook, true)
	}
	ds := receive(t, r, 10)
	for _, d := range ds {
		if d.Msg.ID < msg(1000).ID {
			t.Fatalf("a zombie's message %s reached the receiver", d.Msg.ID)
		}
	}
	waitFor(t, "acks", func() bool { return ak.count() == 10 })
	if n := r.Available(); n != 0 {
		t.Fatalf("%d more deliveries", n)
	}
}

// TestReceiverMoves: the receiving partition moves to another worker (a
// new lease): what its old life did not acknowledge is sent to the new
// one, marked maybe-duplicate.
func TestReceiverMoves(t *testing.T) {
	a, b, c := newTestNode(t, "a", 0, wire.Security{}), newTestNode(t, "b", 0, wire.Security{}), newTestNode(t, "c", 0, wire.Security{})
	se, re := pair(a, b)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	for i := 0; i < 20; i++ {
		offerOne(se, tok, recvP, msg(i), 64, ak.hook, false)
	}
	r := re.Attach(recvP)
	fetch(t, r, 20, false) // fetched, never acknowledged: the old life dies
	b.JobEnded(recvP, 20)
	c.JobStarted(recvP, store.LeaseID(21))
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "c", Addr: c.addr, Lease: 21})
	a.SetRoutes(rs)
	c.SetRoutes(rs)
	ds := receive(t, c.Endpoint(recvP, 21).Attach(recvP), 20)
	for i, d := range ds {
		if d.Msg.ID != msg(i).ID || !d.MaybeDuplicate {
			t.Fatalf("delivery %d to the new life = %s dup=%v", i, d.Msg.ID, d.MaybeDuplicate)
		}
	}
	waitFor(t, "acks", func() bool { return ak.count() == 20 })
}

// TestLocalChannel: sender and receiver on one node: delivered without the
// network, in order, with acknowledgements.
func TestLocalChannel(t *testing.T) {
	a := newTestNode(t, "a", 0, wire.Security{})
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "a", Addr: a.addr, Lease: 20})
	a.SetRoutes(rs)
	a.JobStarted(sendP, 10)
	a.JobStarted(recvP, 20)
	se := a.Endpoint(sendP, 10)
	tok := se.RegisterSender(sendP, true)
	ak := newAcks()
	for i := 0; i < 300; i++ {
		offerOne(se, tok, recvP, msg(i), 64, ak.hook, false)
	}
	ds := receive(t, a.Endpoint(recvP, 20).Attach(recvP), 300)
	for i, d := range ds {
		if d.Msg.ID != msg(i).ID || d.From != sendP || !d.Ordered {
			t.Fatalf("delivery %d = %s from %q ordered %v", i, d.Msg.ID, d.From, d.Ordered)
		}
	}
	waitFor(t, "acks", func() bool { return ak.count() == 300 })
	if a.Stats().Pushed != 0 {
		t.Fatalf("a local channel pushed %d over the network", a.Stats().Pushed)
	}
}

// TestTokenRequired: a node whose server requires a token refuses a peer
// without it (nothing delivered) and accepts one with it.
func TestTokenRequired(t *testing.T) {
	good := wire.Security{Token: "s3cret"}
	b := newTestNode(t, "b", 0, good)
	bad := newTestNode(t, "a", 0, wire.Security{Token: "wrong"})
	se, re := pair(bad, b)
	tok := se.RegisterSender(sendP, true)
	offerOne(se, tok, recvP, msg(0), 64, nil, false)
	r := re.Attach(recvP)
	waitFor(t, "retries", func() bool { return bad.Stats().Retried >= 3 })
	if r.Available() != 0 {
		t.Fatal("a peer with the wrong token delivered")
	}
	ok := newTestNode(t, "a2", 0, good)
	rs := routes(Route{Partition: sendP, Worker: "a2", Addr: ok.addr, Lease: 11}, Route{Partition: recvP, Worker: "b", Addr: b.addr, Lease: 20})
	ok.SetRoutes(rs)
	b.SetRoutes(rs)
	ok.JobStarted(sendP, 11)
	se2 := ok.Endpoint(sendP, 11)
	offerOne(se2, se2.RegisterSender(sendP, true), recvP, msg(1), 64, nil, false)
	receive(t, r, 1)
}

// BenchmarkRemotePush: messages per second over one channel between two
// nodes on loopback (offer → push → mailbox → fetch → ack → the sender's
// hook), 100-byte payloads: the per-message cost of the distributed mode's
// data plane.
func BenchmarkRemotePush(b *testing.B) {
	a, c := newBenchNode(b, "a"), newBenchNode(b, "b")
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "b", Addr: c.addr, Lease: 20})
	a.SetRoutes(rs)
	c.SetRoutes(rs)
	a.JobStarted(sendP, 10)
	c.JobStarted(recvP, 20)
	se := a.Endpoint(sendP, 10)
	tok := se.RegisterSender(sendP, true)
	r := c.Endpoint(recvP, 20).Attach(recvP)
	done := make(chan struct{})
	var acked int
	var mu sync.Mutex
	// One hook for every offer, as a job has one per route.
	hook := transport.NewAckHook(func(acks []transport.Acked) {
		mu.Lock()
		prev := acked
		acked += len(acks)
		if prev < b.N && acked >= b.N {
			close(done)
		}
		mu.Unlock()
	})
	go func() {
		for got := 0; got < b.N; {
			ds := r.Fetch(1000, 1<<30)
			if len(ds) == 0 {
				<-r.Notify()
				continue
			}
			ids := make([]msgid.ID, len(ds))
			for i, d := range ds {
				ids[i] = d.Msg.ID
			}
			r.Ack(ids...)
			got += len(ds)
		}
	}()
	payload := strings.Repeat("x", 100)
	one := make([]transport.Offer, 1) // the hub copies an offer: reused
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		one[0] = transport.Offer{Msg: &weir.Message{ID: msgid.ID(fmt.Sprintf("m%012d", i)), Stream: "s", Payload: weir.Row{"v": payload}}, Size: 160}
		for se.OfferBatch(tok, recvP, one, hook) == 0 {
			<-se.Ready(recvP)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func newBenchNode(b *testing.B, id string) *testNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tn := &testNode{addr: ln.Addr().String()}
	sec := wire.Security{}
	tn.Node = NewNode(Config{Worker: id, Addr: tn.addr, Dial: func(addr string) (grpc.ClientConnInterface, error) { return sec.Dial(addr) }})
	opts, _ := sec.ServerOptions()
	tn.srv = grpc.NewServer(opts...)
	tn.Register(tn.srv)
	go tn.srv.Serve(ln)
	b.Cleanup(func() { tn.Close(); tn.srv.Stop() })
	return tn
}

// TestOriginsCrossTheNetwork: an offer's Origin travels with it, over the
// network and on a channel within one node, so that the receiver
// deduplicates it by its origin's frontier wherever it is delivered (one
// processed through that frontier keeps no id row: delivered again without
// its origin, it would be processed twice). The sender's own promise
// (unordered here) travels beside it.
func TestOriginsCrossTheNetwork(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			a := newTestNode(t, "a", 0, wire.Security{})
			var se *Endpoint
			var r transport.Receiver
			if local {
				se, _, r = localPair(t, a)
			} else {
				b := newTestNode(t, "b", 0, wire.Security{})
				var re *Endpoint
				se, re = pair(a, b)
				r = re.Attach(recvP)
			}
			tok := se.RegisterSender(sendP, false)
			const n = 40
			offers := make([]transport.Offer, n)
			for i := range offers {
				offers[i] = transport.Offer{Msg: msg(i), Size: 64}
				if i%3 != 0 {
					offers[i].Origin = transport.PartitionID(fmt.Sprintf("Up/%d", i%3))
				}
			}
			for rest := offers; len(rest) > 0; {
				if rest = rest[se.OfferBatch(tok, recvP, rest, nil):]; len(rest) > 0 {
					<-se.Ready(recvP)
				}
			}
			ds := receive(t, r, n)
			for i, d := range ds {
				if d.Msg.ID != msg(i).ID || d.From != sendP || d.Origin != offers[i].Origin || d.Ordered {
					t.Fatalf("delivery %d = %s from %q origin %q ordered %v, want origin %q from a sender registered unordered",
						i, d.Msg.ID, d.From, d.Origin, d.Ordered, offers[i].Origin)
				}
			}
		})
	}
}
