package remote

import (
	"fmt"
	"runtime"
	"testing"

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
	hook := func(msgid.ID) { acked <- struct{}{} }
	for _, m := range msgs {
		for !se.Offer(tok, recvP, m, 64, hook, false) {
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
	if per > 3.5 {
		t.Fatalf("%.2f allocations per message through a local channel, want at most 3.5", per)
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
