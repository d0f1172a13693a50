package remote

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
)

// TestNodeRowLimit: SetRowLimit bounds both of a node's buffers by rows,
// the mailboxes of its jobs' lives and its outgoing channels, however
// small the messages (a worker sets it from its plan: transport.RowLimit).
func TestNodeRowLimit(t *testing.T) {
	n := NewNode(Config{Worker: "w"})
	n.SetRowLimit(5)
	offers := make([]transport.Offer, 20)
	for i := range offers {
		offers[i] = transport.Offer{Msg: &weir.Message{ID: msgid.Ordered(1, "s", uint64(i)), Stream: "s"}, Size: 1}
	}
	for name, hub := range map[string]*transport.Hub{"a job's mailbox": n.in, "an outgoing channel": n.out} {
		if got := hub.OfferBatch(transport.SenderToken{}, mailbox(recvP, 7), offers, nil); got != 5 {
			t.Errorf("%s took %d of 20 one-byte messages, want 5", name, got)
		}
	}
}
