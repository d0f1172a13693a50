package transport

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// TestHubFence: Fence supersedes every token of a partition issued so far
// — their offers are dropped, never delivered — and a token registered
// after it offers again.
func TestHubFence(t *testing.T) {
	h := NewHub(0)
	old := h.RegisterSender("Reader@0", true)
	offer := func(tok SenderToken, id msgid.ID) {
		h.OfferBatch(tok, "Counter/0", []Offer{{Msg: &weir.Message{ID: id, Stream: "words"}}}, nil)
	}
	offer(old, "a")
	h.Fence("Reader@0")
	offer(old, "b") // a stopped life routed by an earlier layout: dropped
	next := h.RegisterSender("Reader@0", true)
	offer(next, "c")
	r := h.Attach("Counter/0")
	var got []msgid.ID
	for _, d := range r.Fetch(10, 1<<20) {
		got = append(got, d.Msg.ID)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("delivered %v; want a (before the fence) and c (a later registration), not b", got)
	}
}
