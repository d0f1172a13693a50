package transport

// Tests of the Faults hook: what a lost acknowledgement and a late
// duplicate look like to the receiver and to the sender. The engine-level
// consequences (exactly-once under these faults) are tested by
// internal/chaos.

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// scripted fires each fault for the listed ids, once.
type scripted struct {
	lose, redeliver map[msgid.ID]bool
}

func (s *scripted) LoseAck(_ PartitionID, id msgid.ID) bool {
	if s.lose[id] {
		delete(s.lose, id)
		return true
	}
	return false
}

func (s *scripted) Redeliver(_ PartitionID, id msgid.ID) bool { return s.redeliver[id] }

func fetchIDs(r Receiver) (ids []msgid.ID, dup []bool) {
	for _, d := range r.Fetch(100, 1<<20) {
		ids = append(ids, d.Msg.ID)
		dup = append(dup, d.MaybeDuplicate)
	}
	return ids, dup
}

// TestLoseAck: a lost acknowledgement does not reach the sender; the message
// is fetched again, marked MaybeDuplicate, and the next acknowledgement goes
// through.
func TestLoseAck(t *testing.T) {
	h := NewHub(0)
	h.SetFaults(&scripted{lose: map[msgid.ID]bool{"a": true}})
	acked := map[msgid.ID]int{}
	ack := func(id msgid.ID) { acked[id]++ }
	for _, id := range []msgid.ID{"a", "b"} {
		if !offerOne(h, SenderToken{}, "P/0", &weir.Message{ID: id}, 10, ack, false) {
			t.Fatalf("offer %s refused", id)
		}
	}
	r := h.Attach("P/0")
	ids, dup := fetchIDs(r)
	if len(ids) != 2 || dup[0] || dup[1] {
		t.Fatalf("first fetch = %v %v, want [a b], no duplicates", ids, dup)
	}
	r.Ack("a", "b")
	if acked["a"] != 0 || acked["b"] != 1 {
		t.Fatalf("acks after a lost one: %v, want only b", acked)
	}
	if r.Pending() != 1 {
		t.Fatalf("pending = %d, want 1 (a is still unacknowledged)", r.Pending())
	}
	ids, dup = fetchIDs(r)
	if len(ids) != 1 || ids[0] != "a" || !dup[0] {
		t.Fatalf("refetch = %v %v, want [a] as a maybe-duplicate", ids, dup)
	}
	r.Ack("a")
	if acked["a"] != 1 || r.Pending() != 0 {
		t.Fatalf("after the second ack: acks %v, pending %d", acked, r.Pending())
	}
}

// TestRedeliver: a redelivered message comes back once after its
// acknowledgement, as a maybe-duplicate, and its acknowledgement reaches
// the sender a second time.
func TestRedeliver(t *testing.T) {
	h := NewHub(0)
	h.SetFaults(&scripted{redeliver: map[msgid.ID]bool{"a": true}})
	acked := 0
	offerOne(h, SenderToken{}, "P/0", &weir.Message{ID: "a"}, 10, func(msgid.ID) { acked++ }, false)
	r := h.Attach("P/0")
	if ids, dup := fetchIDs(r); len(ids) != 1 || dup[0] {
		t.Fatalf("first fetch = %v %v", ids, dup)
	}
	r.Ack("a")
	ids, dup := fetchIDs(r)
	if len(ids) != 1 || ids[0] != "a" || !dup[0] {
		t.Fatalf("after the ack: fetch = %v %v, want the duplicate of a", ids, dup)
	}
	r.Ack("a")
	if acked != 2 {
		t.Fatalf("sender saw %d acknowledgements, want 2", acked)
	}
	if ids, _ := fetchIDs(r); len(ids) != 0 || r.Pending() != 0 {
		t.Fatalf("a third copy: %v, pending %d", ids, r.Pending())
	}
}

// TestNoFaultsByDefault: without SetFaults nothing is lost or repeated.
func TestNoFaultsByDefault(t *testing.T) {
	h := NewHub(0)
	acked := 0
	offerOne(h, SenderToken{}, "P/0", &weir.Message{ID: "a"}, 10, func(msgid.ID) { acked++ }, false)
	r := h.Attach("P/0")
	fetchIDs(r)
	r.Ack("a")
	if ids, _ := fetchIDs(r); len(ids) != 0 || acked != 1 || r.Pending() != 0 {
		t.Fatalf("fetch %v, acks %d, pending %d", ids, acked, r.Pending())
	}
}
