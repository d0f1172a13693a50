package transport

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// hookLog records an AckHook's calls: the acknowledged ids and tokens of
// each call.
type hookLog struct {
	calls [][]Acked
}

func (l *hookLog) hook() *AckHook {
	return NewAckHook(func(acks []Acked) { l.calls = append(l.calls, slices.Clone(acks)) })
}

// offerOne offers msg alone, as a one-message OfferBatch, and reports
// whether p took it. ack, if not nil, is told msg's id once it is
// acknowledged: each call makes a hook of its own, so a later offer of the
// same id replaces it (the newest offer's hook is the one told).
func offerOne(h *Hub, from SenderToken, p PartitionID, msg *weir.Message, size int, ack func(msgid.ID), maybeDup bool) bool {
	var hook *AckHook
	if ack != nil {
		hook = NewAckHook(func(acks []Acked) {
			for _, a := range acks {
				ack(a.ID)
			}
		})
	}
	return h.OfferBatch(from, p, []Offer{{Msg: msg, Size: size, MaybeDup: maybeDup}}, hook) == 1
}

func batchMsgs(n int) ([]*weir.Message, []Offer) {
	msgs := make([]*weir.Message, n)
	offers := make([]Offer, n)
	for i := range msgs {
		msgs[i] = &weir.Message{ID: msgid.Ordered(1, "s", uint64(i)), Stream: "s"}
		offers[i] = Offer{Msg: msgs[i], Size: 10, Token: i}
	}
	return msgs, offers
}

// TestOfferBatchTakesAPrefix: a batch that does not fit is taken up to the
// first offer that does not; the rest is the caller's to offer again, and
// arrives after the taken ones.
func TestOfferBatchTakesAPrefix(t *testing.T) {
	h := NewHub(35) // three 10-byte messages fit, a fourth does not
	recv := h.Attach("P/0")
	var log hookLog
	hook := log.hook()
	_, offers := batchMsgs(5)
	if n := h.OfferBatch(SenderToken{}, "P/0", offers, hook); n != 3 {
		t.Fatalf("OfferBatch took %d of 5 offers into a buffer for 3, want 3", n)
	}
	ds := recv.Fetch(10, 1<<20)
	if len(ds) != 3 {
		t.Fatalf("fetched %d, want 3", len(ds))
	}
	recv.Ack(ds[0].Msg.ID, ds[1].Msg.ID, ds[2].Msg.ID)
	if n := h.OfferBatch(SenderToken{}, "P/0", offers[3:], hook); n != 2 {
		t.Fatalf("after the acknowledgement OfferBatch took %d of the 2 remaining, want 2", n)
	}
	ds = recv.Fetch(10, 1<<20)
	if len(ds) != 2 || ds[0].Msg.ID != offers[3].Msg.ID || ds[1].Msg.ID != offers[4].Msg.ID {
		t.Fatalf("second fetch %v, want offers 3 and 4 in order", ds)
	}
}

// TestDeliveryCarriesSize: a delivery carries the Size of the offer that
// buffered it, and a later offer of the same id (a re-send) does not
// change what the buffer counted.
func TestDeliveryCarriesSize(t *testing.T) {
	h := NewHub(1 << 20)
	recv := h.Attach("P/0")
	msgs, offers := batchMsgs(2)
	offers[0].Size, offers[1].Size = 123, 45
	h.OfferBatch(SenderToken{}, "P/0", offers, nil)
	h.OfferBatch(SenderToken{}, "P/0", []Offer{{Msg: msgs[0], Size: 999}}, nil)
	ds := recv.Fetch(10, 1<<20)
	if len(ds) != 2 || ds[0].Size != 123 || ds[1].Size != 45 {
		t.Fatalf("fetched %+v, want sizes 123 and 45", ds)
	}
}

// TestAckHookRunsPerBatch: one Ack calls each hook once per run of
// consecutive ids offered with it, with the offers' tokens, in the Ack's
// order; an id offered again carries the newest offer's hook and token.
func TestAckHookRunsPerBatch(t *testing.T) {
	h := NewHub(1 << 20)
	recv := h.Attach("P/0")
	var a, b hookLog
	ha, hb := a.hook(), b.hook()
	_, offers := batchMsgs(6)
	h.OfferBatch(SenderToken{}, "P/0", offers[:3], ha)
	h.OfferBatch(SenderToken{}, "P/0", offers[3:], hb)
	// Offer 1 again, with b's hook and a new token: the newest sender is
	// the one to tell.
	again := offers[1]
	again.Token = "again"
	h.OfferBatch(SenderToken{}, "P/0", []Offer{again}, hb)
	ids := make([]msgid.ID, 0, 6)
	for _, d := range recv.Fetch(10, 1<<20) {
		ids = append(ids, d.Msg.ID)
	}
	if len(ids) != 6 {
		t.Fatalf("fetched %d, want 6 (an offer of a buffered id is not a second copy)", len(ids))
	}
	recv.Ack(ids...)
	got := func(l hookLog) string {
		s := ""
		for _, c := range l.calls {
			s += "["
			for _, x := range c {
				s += fmt.Sprint(x.Token, " ")
			}
			s += "]"
		}
		return s
	}
	if g, w := got(a), "[0 ][2 ]"; g != w {
		t.Errorf("hook a's calls %s, want %s", g, w)
	}
	if g, w := got(b), "[again ][3 4 5 ]"; g != w {
		t.Errorf("hook b's calls %s, want %s", g, w)
	}
	// A repeated acknowledgement of an acknowledged id calls nothing.
	recv.Ack(ids...)
	if len(a.calls) != 2 || len(b.calls) != 2 {
		t.Errorf("a repeated Ack called the hooks again: %d and %d calls", len(a.calls), len(b.calls))
	}
}

// TestOfferBatchFenced: a superseded sender's batch is dropped whole and
// counted as taken (nothing of it is delivered or acknowledged).
func TestOfferBatchFenced(t *testing.T) {
	h := NewHub(1 << 20)
	recv := h.Attach("C/0")
	old := h.RegisterSender("A/0", true)
	h.RegisterSender("A/0", true)
	var log hookLog
	_, offers := batchMsgs(3)
	if n := h.OfferBatch(old, "C/0", offers, log.hook()); n != 3 {
		t.Fatalf("a fenced OfferBatch reported %d taken, want all 3", n)
	}
	if ds := recv.Fetch(10, 1<<20); len(ds) != 0 {
		t.Fatalf("a fenced sender's batch was delivered: %d messages", len(ds))
	}
}

// TestRowLimit: a mailbox takes at most the row limit of unacknowledged
// messages whatever their bytes, an empty one takes a batch's first offer
// whatever the limit, an acknowledgement makes room and says so (Ready),
// and a limit set later bounds the mailboxes that exist already.
func TestRowLimit(t *testing.T) {
	h := NewHub(1 << 20)
	recv := h.Attach("P/0") // made before the limit
	h.SetRowLimit(2)
	_, offers := batchMsgs(5)
	if n := h.OfferBatch(SenderToken{}, "P/0", offers, nil); n != 2 {
		t.Fatalf("OfferBatch took %d of 5 ten-byte offers into a buffer of 1 MiB and 2 rows, want 2", n)
	}
	ds := recv.Fetch(10, 1<<20)
	if len(ds) != 2 {
		t.Fatalf("fetched %d, want 2", len(ds))
	}
	if n := h.OfferBatch(SenderToken{}, "P/0", offers[2:], nil); n != 0 {
		t.Fatalf("a full mailbox took %d offers: fetched but unacknowledged messages count", n)
	}
	recv.Ack(ds[0].Msg.ID)
	select {
	case <-h.Ready("P/0"):
	default:
		t.Fatal("an acknowledgement did not signal room")
	}
	if n := h.OfferBatch(SenderToken{}, "P/0", offers[2:], nil); n != 1 {
		t.Fatalf("after one acknowledgement the mailbox took %d offers, want 1", n)
	}

	h.SetRowLimit(1)
	h.box("P/1") // a mailbox made after the limit, empty
	if n := h.OfferBatch(SenderToken{}, "P/1", offers[:3], nil); n != 1 {
		t.Fatalf("an empty mailbox with a row limit of 1 took %d offers, want 1", n)
	}
	if n := h.OfferBatch(SenderToken{}, "P/0", offers[3:], nil); n != 0 {
		t.Fatalf("a mailbox above its lowered limit took %d offers, want 0", n)
	}
	if got := RowLimit(1000); got != BufferBatches*1000 {
		t.Fatalf("RowLimit(1000) = %d, want %d", got, BufferBatches*1000)
	}
}
