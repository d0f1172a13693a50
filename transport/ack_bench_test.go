package transport

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// BenchmarkAckOneByOne: a receiver acknowledging a full mailbox one id at
// a time (the network transport's receiving side does; an epoch acks its
// batch at once). Dropping the acknowledged prefix used to copy the rest of
// the mailbox into a new array on every call.
func BenchmarkAckOneByOne(b *testing.B) {
	const n = 20000
	msgs := make([]*weir.Message, n)
	for i := range msgs {
		msgs[i] = &weir.Message{ID: msgid.Ordered(1, "s", uint64(i)), Stream: "s"}
	}
	b.ReportAllocs()
	for b.Loop() {
		h := NewHub(1 << 30)
		recv := h.Attach("P/0")
		for _, m := range msgs {
			offerOne(h, SenderToken{}, "P/0", m, 10, nil, false)
		}
		for _, d := range recv.Fetch(n, 1<<30) {
			recv.Ack(d.Msg.ID)
		}
	}
}
