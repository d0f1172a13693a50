package job

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/tables"
)

func openStore(t *testing.T, clk clock.Clock) store.Store {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), pstore.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func countRows(t *testing.T, st store.Store, table store.Table) int {
	t.Helper()
	n := 0
	if err := st.Scan(context.Background(), store.Range{Table: table}, func(k, v []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDedupGC: dedup rows below a stream's SystemWatermark are deleted by
// tables.GCDedup, and a job started afterwards still rejects those messages (the
// persisted floor stands in for the deleted rows), while messages at or
// above the watermark are looked up as before.
func TestDedupGC(t *testing.T) {
	ctx := context.Background()
	for _, compact := range []bool{false, true} {
		st := openStore(t, clock.Real{})
		in := newInputStore(st, "C", allKeys, compact, true)
		var msgs []*weir.Message
		for i := 1; i <= 10; i++ {
			ts := store.Timestamp(uint64(i) << store.TimestampCounterBits)
			msgs = append(msgs, &weir.Message{ID: msgid.Ordered(uint64(ts), "s", 0), Stream: "s", SystemTimestamp: ts})
		}
		// From an unordered channel: deduplicated by id rows.
		if _, _, err := in.filter(ctx, msgs, nil, nil); err != nil {
			t.Fatal(err)
		}
		txn := store.NewTxn()
		in.register(txn)
		if err := st.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
		table := tables.DedupTable(compact)
		if n := countRows(t, st, table); n != 10 {
			t.Fatalf("compact=%v: %d dedup rows, want 10", compact, n)
		}
		wm := msgs[6].SystemTimestamp // rows of messages 0..5 go
		if err := tables.GCDedup(ctx, st, "C", "s", wm); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, st, table); n != 4 {
			t.Fatalf("compact=%v: %d dedup rows after GC, want 4", compact, n)
		}
		fresh := &weir.Message{ID: msgid.Ordered(uint64(wm)+5, "s", 1), Stream: "s", SystemTimestamp: wm + 5}
		later := newInputStore(st, "C", allKeys, compact, true)
		if err := later.loadFloors(ctx, []string{"s"}); err != nil {
			t.Fatal(err)
		}
		all := append(append([]*weir.Message{}, msgs...), fresh)
		suspect := map[msgid.ID]bool{}
		for _, m := range all {
			suspect[m.ID] = true // re-deliveries: look every one up
		}
		f, processed, err := later.filter(ctx, all, nil, suspect)
		if err != nil {
			t.Fatal(err)
		}
		if len(processed) != 10 || len(f) != 1 || f[0] != fresh {
			t.Fatalf("compact=%v: filter kept %d fresh (want only the new one) and %d processed (want 10)", compact, len(f), len(processed))
		}
	}
}

// TestAtLeastOnceModeSkipsDedup: with checkState off the input store neither
// reads nor writes dedup rows; only the watermark test applies.
func TestAtLeastOnceModeSkipsDedup(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.Real{})
	in := newInputStore(st, "C", allKeys, true, false)
	m := &weir.Message{ID: "x", Stream: "s", SystemTimestamp: 100}
	if _, _, err := in.filter(ctx, []*weir.Message{m}, []origin{{from: "R/0", ordered: true}}, nil); err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn()
	in.register(txn)
	if txn.Len() != 0 {
		t.Fatal("at_least_once_consistent registered a dedup row or frontier")
	}
	in.advance("s", 200)
	_, processed, err := in.filter(ctx, []*weir.Message{m}, nil, map[msgid.ID]bool{m.ID: true})
	if err != nil || len(processed) != 1 {
		t.Fatalf("watermark test not applied: %v %d", err, len(processed))
	}
}

var _ = time.Second

// TestLegacyInfiniteFloorClamped: a dedup floor of 2^63-1 (what older
// versions persisted for a completed computation) is read as the store's
// current timestamp, so messages of a later run are not dropped as
// processed.
func TestLegacyInfiniteFloorClamped(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	txn := store.NewTxn()
	txn.Put(store.FlowState, tables.DedupFloorKey("C", "s"), codec.AppendUint64BE(nil, tables.LegacyInfiniteFloor))
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	before, _ := st.Timestamp(ctx)
	w, err := tables.DedupFloor(ctx, st, "C", "s")
	if err != nil {
		t.Fatal(err)
	}
	after, _ := st.Timestamp(ctx)
	if w <= before || w >= after {
		t.Fatalf("floor = %d, want a current timestamp between %d and %d", w, before, after)
	}
}
