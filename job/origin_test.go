package job

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestSwiftHopTagsOrigins: a Swift computation fed by several ordered
// upstream partitions offers each output with the partition its parent
// came from (transport.Offer.Origin), each epoch's outputs in id order, so
// that every origin's ids reach the receiver in increasing order although
// user code saw them grouped by key; a parent from an unordered sender
// gives no origin.
func TestSwiftHopTagsOrigins(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"Hop": {Code: weir.SwiftMap(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
			return out.Add("out", m.Payload)
		}), GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"in"}, Outputs: []string{"out"}},
		"C": {Code: weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil }),
			GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"out"}},
	}}
	hub := transport.NewHub(0)
	hop, down := plan.KeyedPartitionID("Hop", 0), plan.KeyedPartitionID("C", 0)
	j := startTestJob(t, st, hub, pl, "Hop", plan.PartitionSpec{ID: hop, ToEnd: true})
	ts, _ := st.Timestamp(ctx)
	msg := func(i uint64, key string) *weir.Message {
		return &weir.Message{ID: msgid.Ordered(uint64(ts), "in", i), Stream: "in", SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: weir.Row{"key": key}}
	}
	r0, r1 := hub.RegisterSender("R/0", true), hub.RegisterSender("R/1", true)
	u := hub.RegisterSender("U/0", false)
	// Keys chosen so that key order is not id order.
	hub.OfferBatch(r0, hop, []transport.Offer{{Msg: msg(0, "z"), Size: 10}, {Msg: msg(2, "a"), Size: 10}}, nil)
	hub.OfferBatch(r1, hop, []transport.Offer{{Msg: msg(1, "m"), Size: 10}, {Msg: msg(3, "b"), Size: 10}}, nil)
	hub.OfferBatch(u, hop, []transport.Offer{{Msg: msg(4, "c"), Size: 10}}, nil)
	if _, err := j.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	got := hub.Attach(down).Fetch(100, 1<<20)
	var ids []msgid.ID
	origins := map[string]transport.PartitionID{}
	for _, d := range got {
		ids = append(ids, d.Msg.ID)
		origins[d.Msg.Payload["key"].(string)] = d.Origin
		if d.Ordered {
			t.Errorf("%s: delivered as from an ordered sender: only its origin %q orders it", d.Msg.ID, d.Origin)
		}
	}
	if len(got) != 5 || !slices.IsSortedFunc(ids, func(a, b msgid.ID) int { return strings.Compare(string(a), string(b)) }) {
		t.Fatalf("offered %v: want the 5 outputs in id order", ids)
	}
	want := map[string]transport.PartitionID{"z": "R/0", "a": "R/0", "m": "R/1", "b": "R/1", "c": ""}
	for k, o := range want {
		if origins[k] != o {
			t.Errorf("output of key %s: origin %q, want %q", k, origins[k], o)
		}
	}
}
