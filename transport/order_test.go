package transport

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// TestDeliveriesNameTheirOrderedSender: a delivery carries its sending
// partition and whether it registered as ordered; one sender's offers are
// delivered in offer order, and a re-offer of a buffered id (a restarted
// sender) keeps the buffered copy's place while taking the newest sender's
// registration.
func TestDeliveriesNameTheirOrderedSender(t *testing.T) {
	h := NewHub(0)
	rx := h.Attach("C/0")
	first := h.RegisterSender("R/0", true)
	for _, id := range []msgid.ID{"a", "b", "c"} {
		offerOne(h, first, "C/0", &weir.Message{ID: id}, 10, nil, false)
	}
	offerOne(h, SenderToken{}, "C/0", &weir.Message{ID: "z"}, 10, nil, false)
	second := h.RegisterSender("R/0", false) // its next life, unordered
	offerOne(h, second, "C/0", &weir.Message{ID: "b"}, 10, nil, true)
	got := rx.Fetch(10, 1<<20)
	want := []struct {
		id      msgid.ID
		from    PartitionID
		ordered bool
	}{{"a", "R/0", true}, {"b", "R/0", false}, {"c", "R/0", true}, {"z", "", false}}
	if len(got) != len(want) {
		t.Fatalf("fetched %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		d := got[i]
		if d.Msg.ID != w.id || d.From != w.from || d.Ordered != w.ordered {
			t.Errorf("delivery %d = %s from %q ordered %v, want %s from %q ordered %v", i, d.Msg.ID, d.From, d.Ordered, w.id, w.from, w.ordered)
		}
	}
	if !got[1].MaybeDuplicate {
		t.Error("the re-offered id is not marked MaybeDuplicate")
	}
	if !first.Ordered() || second.Ordered() || (SenderToken{}).Ordered() {
		t.Error("SenderToken.Ordered does not report the registration")
	}
}

// TestOriginOrdersASubChannel: an offer's Origin is delivered with it,
// beside the sender's own promise (Ordered, here unordered), for the
// receiver to order the sub-channel by; a re-offer of a buffered id takes
// the newest offer's origin.
func TestOriginOrdersASubChannel(t *testing.T) {
	h := NewHub(0)
	rx := h.Attach("C/0")
	tok := h.RegisterSender("Hop/0", false)
	h.OfferBatch(tok, "C/0", []Offer{
		{Msg: &weir.Message{ID: "a"}, Size: 10, Origin: "R/0"},
		{Msg: &weir.Message{ID: "b"}, Size: 10},
		{Msg: &weir.Message{ID: "c"}, Size: 10, Origin: "R/1"},
	}, nil)
	h.OfferBatch(tok, "C/0", []Offer{{Msg: &weir.Message{ID: "c"}, Size: 10, MaybeDup: true}}, nil)
	got := rx.Fetch(10, 1<<20)
	want := []PartitionID{"R/0", "", ""}
	if len(got) != len(want) {
		t.Fatalf("fetched %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		if d := got[i]; d.From != "Hop/0" || d.Origin != w || d.Ordered {
			t.Errorf("delivery %d (%s) from %q origin %q ordered %v, want origin %q, not ordered", i, d.Msg.ID, d.From, d.Origin, d.Ordered, w)
		}
	}
}
