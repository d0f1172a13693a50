package job

import (
	"context"
	"slices"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// allKeys is the range of a computation's only partition.
var allKeys = tables.FrontierRange{ToEnd: true}

// frontierMsg is message seq of an ordered sender on stream s (ids order
// like seq).
func frontierMsg(seq uint64) *weir.Message {
	ts := store.Timestamp(seq << store.TimestampCounterBits)
	return &weir.Message{ID: msgid.Ordered(uint64(ts), "s", 0), Stream: "s", SystemTimestamp: ts}
}

func idsOf(msgs []*weir.Message) []msgid.ID {
	out := make([]msgid.ID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// commitFilter filters msgs (all from the given origins), registers and
// commits, and returns the fresh and processed ids.
func commitFilter(t *testing.T, st store.Store, in *inputStore, msgs []*weir.Message, origins []origin, suspect map[msgid.ID]bool) (fresh, processed []msgid.ID) {
	t.Helper()
	f, p, err := in.filter(context.Background(), msgs, origins, suspect)
	if err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn()
	in.register(txn)
	if err := st.Commit(context.Background(), txn); err != nil {
		t.Fatal(err)
	}
	return idsOf(f), idsOf(p)
}

func originsOf(n int, from transport.PartitionID, ordered bool) []origin {
	o := make([]origin, n)
	for i := range o {
		o[i] = origin{from: from, ordered: ordered}
	}
	return o
}

// TestFrontierDedup: inputs from an ordered channel are deduplicated by the
// channel's frontier — one partition_states row per channel, no dedup row
// per message, no lookup — across a restart of the receiving job; channels
// of the same stream from different senders have frontiers of their own;
// unordered channels keep one dedup row per message.
func TestFrontierDedup(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	in := newInputStore(st, "C", allKeys, false, true)
	if err := in.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	a := []*weir.Message{frontierMsg(10), frontierMsg(11), frontierMsg(12)}
	fresh, processed := commitFilter(t, st, in, a, originsOf(3, "R/0", true), nil)
	if len(fresh) != 3 || len(processed) != 0 {
		t.Fatalf("first delivery: fresh %v processed %v", fresh, processed)
	}
	if n := countRows(t, st, store.InputMessages); n != 0 {
		t.Fatalf("%d dedup rows for an ordered channel, want 0", n)
	}
	if v, ok, _ := st.Get(ctx, store.FlowState, tables.FrontierKey("C", "s", "R/0", allKeys)); !ok || msgid.ID(v) != a[2].ID {
		t.Fatalf("frontier row = %q %v, want %s", v, ok, a[2].ID)
	}

	// A restarted job: the sender re-sends 11 and 12 (marked suspect) and
	// sends 13; another sender R/1 sends ids below R/0's frontier.
	later := newInputStore(st, "C", allKeys, false, true)
	if err := later.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	b := []*weir.Message{frontierMsg(11), frontierMsg(12), frontierMsg(13), frontierMsg(5), frontierMsg(6)}
	origins := append(originsOf(3, "R/0", true), originsOf(2, "R/1", true)...)
	suspect := map[msgid.ID]bool{b[0].ID: true, b[1].ID: true}
	fresh, processed = commitFilter(t, st, later, b, origins, suspect)
	if !slices.Equal(processed, idsOf(b[:2])) || !slices.Equal(fresh, idsOf(b[2:])) {
		t.Fatalf("after restart: fresh %v processed %v; want fresh %v", fresh, processed, idsOf(b[2:]))
	}
	// An id repeated within one batch, and an older one, are processed.
	c := []*weir.Message{frontierMsg(14), frontierMsg(14), frontierMsg(13)}
	fresh, processed = commitFilter(t, st, later, c, originsOf(3, "R/0", true), nil)
	if len(fresh) != 1 || len(processed) != 2 {
		t.Fatalf("repeats: fresh %v processed %v", fresh, processed)
	}
	if n := countRows(t, st, store.InputMessages); n != 0 {
		t.Fatalf("%d dedup rows for ordered channels, want 0", n)
	}

	// An unordered channel keeps a row per message and is looked up.
	u := []*weir.Message{frontierMsg(100), frontierMsg(101)}
	commitFilter(t, st, later, u, originsOf(2, "S/0", false), nil)
	if n := countRows(t, st, store.InputMessages); n != 2 {
		t.Fatalf("%d dedup rows for an unordered channel, want 2", n)
	}
	fresh, processed = commitFilter(t, st, later, u, originsOf(2, "S/0", false), map[msgid.ID]bool{u[0].ID: true, u[1].ID: true})
	if len(fresh) != 0 || len(processed) != 2 {
		t.Fatalf("unordered re-delivery: fresh %v processed %v", fresh, processed)
	}
}

// TestFrontierStartsAfterIDRows: a channel without a frontier (data written
// before frontiers existed) is looked up in the dedup table; its first
// fresh message starts the frontier.
func TestFrontierStartsAfterIDRows(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	old := []*weir.Message{frontierMsg(1), frontierMsg(2)}
	txn := store.NewTxn()
	for _, m := range old {
		txn.Put(store.InputMessages, tables.DedupKey(false, "C", m.Stream, m.SystemTimestamp, m.ID), nil)
	}
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	in := newInputStore(st, "C", allKeys, false, true)
	if err := in.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := []*weir.Message{frontierMsg(1), frontierMsg(2), frontierMsg(3)}
	suspect := map[msgid.ID]bool{msgs[0].ID: true, msgs[1].ID: true}
	fresh, processed := commitFilter(t, st, in, msgs, originsOf(3, "R/0", true), suspect)
	if !slices.Equal(processed, idsOf(old)) || len(fresh) != 1 || fresh[0] != msgs[2].ID {
		t.Fatalf("fresh %v processed %v", fresh, processed)
	}
	if v, ok, _ := st.Get(ctx, store.FlowState, tables.FrontierKey("C", "s", "R/0", allKeys)); !ok || msgid.ID(v) != msgs[2].ID {
		t.Fatalf("frontier row = %q %v, want %s", v, ok, msgs[2].ID)
	}
}

// TestSortByID: a Swift source's outputs are offered in id order even when
// user code saw them in another (AlignmentTimestamp) order; the lineage
// stays aligned.
func TestSortByID(t *testing.T) {
	a, b, c := frontierMsg(3), frontierMsg(1), frontierMsg(2)
	outs := []*weir.Message{a, b, c}
	lineage := [][]*weir.Message{{a}, {b}, {c}}
	sortByID(outs, lineage)
	if !slices.Equal(idsOf(outs), []msgid.ID{b.ID, c.ID, a.ID}) {
		t.Fatalf("order %v", idsOf(outs))
	}
	for i, m := range outs {
		if lineage[i][0] != m {
			t.Fatalf("lineage %d not aligned", i)
		}
	}
}

// TestFrontierAcrossLayouts: after a change of the receiving computation's
// partition count, a partition of the new layout still drops a re-sent
// message that a partition of the old layout processed (its row covers the
// message's key hash), and processes one the old row does not cover.
func TestFrontierAcrossLayouts(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	low := tables.FrontierRange{Lo: 0, Hi: 1 << 63}
	withHash := func(m *weir.Message, h uint64) *weir.Message { m.Key.Hash = h; return m }
	// Old layout: two partitions; the low one processed up to 20 from R/0.
	old := newInputStore(st, "C", low, false, true)
	commitFilter(t, st, old, []*weir.Message{withHash(frontierMsg(20), 5)}, originsOf(1, "R/0", true), nil)
	// New layout: one partition over all keys. R/0 replays 15 (key in the
	// old low range: processed) and 16 (key in the old high range, whose
	// partition never processed anything from R/0: not processed).
	all := newInputStore(st, "C", allKeys, false, true)
	if err := all.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := withHash(frontierMsg(15), 7), withHash(frontierMsg(16), 1<<63+7)
	fresh, processed := commitFilter(t, st, all, []*weir.Message{a, b}, originsOf(2, "R/0", true), map[msgid.ID]bool{a.ID: true, b.ID: true})
	if !slices.Equal(processed, []msgid.ID{a.ID}) || !slices.Equal(fresh, []msgid.ID{b.ID}) {
		t.Fatalf("fresh %v processed %v; want %s processed, %s fresh", fresh, processed, a.ID, b.ID)
	}
}

// TestFrontierPerOrigin: a sender that interleaves the ids of several
// origins (a Swift hop fed by ordered upstream partitions,
// transport.Offer.Origin) is deduplicated by one frontier per (sender,
// origin): an id below another origin's frontier is fresh, one at or below
// its own origin's frontier is processed, across a restart of the
// receiving job (the frontier rows' sender is tables.ChannelSender), and no
// dedup row is written per message.
func TestFrontierPerOrigin(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	via := func(o transport.PartitionID) origin { return origin{from: "Hop/0", via: o, ordered: true} }
	in := newInputStore(st, "C", allKeys, false, true)
	if err := in.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	// Origin R/0 sends 10, 12; origin R/1 sends 5, 11: interleaved as the
	// hop forwards them.
	a := []*weir.Message{frontierMsg(10), frontierMsg(5), frontierMsg(12), frontierMsg(11)}
	fresh, processed := commitFilter(t, st, in, a, []origin{via("R/0"), via("R/1"), via("R/0"), via("R/1")}, nil)
	if len(fresh) != 4 || len(processed) != 0 {
		t.Fatalf("first delivery: fresh %v processed %v", fresh, processed)
	}
	if n := countRows(t, st, store.InputMessages); n != 0 {
		t.Fatalf("%d dedup rows for ordered sub-channels, want 0", n)
	}
	for o, want := range map[string]msgid.ID{"R/0": a[2].ID, "R/1": a[3].ID} {
		k := tables.FrontierKey("C", "s", tables.ChannelSender("Hop/0", o), allKeys)
		if v, ok, _ := st.Get(ctx, store.FlowState, k); !ok || msgid.ID(v) != want {
			t.Fatalf("frontier of origin %s = %q %v, want %s", o, v, ok, want)
		}
	}
	// A restarted receiver: the hop's new life re-sends 12 (R/0) and 5, 11
	// (R/1) as suspect, then new ids of each origin, the new R/1 id below
	// R/0's frontier.
	later := newInputStore(st, "C", allKeys, false, true)
	if err := later.loadFrontiers(ctx); err != nil {
		t.Fatal(err)
	}
	b := []*weir.Message{frontierMsg(5), frontierMsg(12), frontierMsg(11), frontierMsg(13), nil}
	b[4] = frontierMsg(11)
	b[4].ID += "~" // an id of R/1 just above 11, still below R/0's 12
	origins := []origin{via("R/1"), via("R/0"), via("R/1"), via("R/0"), via("R/1")}
	suspect := map[msgid.ID]bool{b[0].ID: true, b[1].ID: true, b[2].ID: true}
	fresh, processed = commitFilter(t, st, later, b, origins, suspect)
	if !slices.Equal(processed, idsOf(b[:3])) || !slices.Equal(fresh, idsOf(b[3:])) {
		t.Fatalf("after restart: fresh %v processed %v; want fresh %v", fresh, processed, idsOf(b[3:]))
	}
	// The sender's own frontier (no origin) is a channel of its own.
	fresh, _ = commitFilter(t, st, later, []*weir.Message{frontierMsg(1)}, originsOf(1, "Hop/0", true), nil)
	if len(fresh) != 1 {
		t.Fatalf("the sender's own channel: fresh %v, want its first message", fresh)
	}
}
