package remote

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/wire"
)

// localPair is a node with a sending life of S/0 (lease 10) and a
// receiving life of R/0 (lease 20), both here.
func localPair(t testing.TB, a *testNode) (*Endpoint, transport.SenderToken, transport.Receiver) {
	rs := routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "a", Addr: a.addr, Lease: 20})
	a.SetRoutes(rs)
	a.JobStarted(sendP, 10)
	a.JobStarted(recvP, 20)
	se := a.Endpoint(sendP, 10)
	return se, se.RegisterSender(sendP, true), a.Endpoint(recvP, 20).Attach(recvP)
}

// localRound offers msgs on the local channel and fetches and acknowledges
// them all, waiting until the sender's hooks ran.
func localRound(t testing.TB, se *Endpoint, tok transport.SenderToken, r transport.Receiver, msgs []*weir.Message) {
	acked := make(chan struct{}, len(msgs))
	hook := transport.NewAckHook(func(acks []transport.Acked) {
		for range acks {
			acked <- struct{}{}
		}
	})
	// As a job offers an epoch's outputs to one destination: one batch.
	offers := make([]transport.Offer, len(msgs))
	for i, m := range msgs {
		offers[i] = transport.Offer{Msg: m, Size: 64}
	}
	for rest := offers; len(rest) > 0; {
		if rest = rest[se.OfferBatch(tok, recvP, rest, hook):]; len(rest) > 0 {
			<-se.Ready(recvP)
		}
	}
	ids := make([]msgid.ID, 0, len(msgs))
	for got := 0; got < len(msgs); {
		ds := r.Fetch(1000, 1<<30)
		if len(ds) == 0 {
			<-r.Notify()
			continue
		}
		ids = ids[:0]
		for _, d := range ds {
			ids = append(ids, d.Msg.ID)
		}
		r.Ack(ids...)
		got += len(ds)
	}
	for range msgs {
		<-acked
	}
}

// TestLocalChannelAllocs bounds the allocations of a message through a
// local channel (offer, forward into the receiving life's mailbox, fetch,
// acknowledge, the sender's hook): the distributed mode's own cost per
// message on one worker. Naming the mailbox and looking up the channel per
// message cost two more allocations each (and 5% of a worker's CPU).
func TestLocalChannelAllocs(t *testing.T) {
	a := newTestNode(t, "a", 0, wire.Security{})
	se, tok, r := localPair(t, a)
	const n = 5000
	batch := func(round int) []*weir.Message {
		ms := make([]*weir.Message, n)
		for i := range ms {
			ms[i] = &weir.Message{ID: msgid.ID(fmt.Sprintf("r%d-%06d", round, i)), Stream: "s", Payload: weir.Row{"v": int64(i)}}
		}
		return ms
	}
	localRound(t, se, tok, r, batch(0)) // warm: maps and slices at size
	ms := batch(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	localRound(t, se, tok, r, ms)
	runtime.ReadMemStats(&after)
	per := float64(after.Mallocs-before.Mallocs) / n
	t.Logf("%.2f allocations per message", per)
	if per > 0.5 {
		t.Fatalf("%.2f allocations per message through a local channel, want at most 0.5 (an epoch's batch is offered, forwarded and acknowledged in blocks)", per)
	}
}

// BenchmarkLocalChannel: messages through a local channel (sender and
// receiver on one node), with their acknowledgements.
func BenchmarkLocalChannel(b *testing.B) {
	a := newBenchNode(b, "a")
	se, tok, r := localPair(b, a)
	const n = 1000
	ms := make([]*weir.Message, n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		for j := range ms {
			ms[j] = &weir.Message{ID: msgid.ID(fmt.Sprintf("m%012d", i+j)), Stream: "s", Payload: weir.Row{"v": int64(j)}}
		}
		localRound(b, se, tok, r, ms)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// TestLocalChannelWaitsForRoomWithoutSpinning: a local channel whose
// receiving mailbox is full waits for room without using the CPU, also
// after a route change that keeps its target (every controller heartbeat
// sets the routes): the wait used to select on the change signal it had
// already seen, which stays closed, and spun until the receiver made room
// — at full speed exactly when the worker was overloaded.
func TestLocalChannelWaitsForRoomWithoutSpinning(t *testing.T) {
	a := newTestNode(t, "a", 1000, wire.Security{})
	se, tok, r := localPair(t, a)
	// The channel's box takes 15 offers of 64 bytes; the receiving
	// mailbox 10 of them (its rows bounded here), so the channel waits for
	// room.
	a.in.SetRowLimit(10)
	for i := 0; i < 15; i++ {
		if !offerOne(se, tok, recvP, msg(i), 64, nil, false) {
			t.Fatalf("offer %d refused", i)
		}
	}
	waitFor(t, "a full mailbox", func() bool { return r.Available() == 10 })
	a.SetRoutes(routes(Route{Partition: sendP, Worker: "a", Addr: a.addr, Lease: 10}, Route{Partition: recvP, Worker: "a", Addr: a.addr, Lease: 20}))
	time.Sleep(20 * time.Millisecond)
	began, cpu0 := time.Now(), processCPU()
	time.Sleep(300 * time.Millisecond)
	if used, wall := processCPU()-cpu0, time.Since(began); used > wall/3 {
		t.Fatalf("the process used %v of CPU in %v while a local channel waited for room", used, wall)
	}
	// The rest arrives once there is room, each message with the size its
	// sender offered it with, not sized again by the channel.
	for _, d := range receive(t, r, 15) {
		if d.Size != 64 {
			t.Fatalf("%s arrived with size %d, want the sender's 64", d.Msg.ID, d.Size)
		}
	}
}

// processCPU is this process's CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
