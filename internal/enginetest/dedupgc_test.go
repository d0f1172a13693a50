package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// dedupRowCount counts the rows of both dedup tables.
func dedupRowCount(ctx context.Context, t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	for _, tb := range []store.Table{store.InputMessages, store.CompactInputMessages} {
		if err := st.Scan(ctx, store.Range{Table: tb}, func(_, _ []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestSwiftSourceIdlePartitionDoesNotPinDedupGC: a Swift source partition
// that is empty, or that has read nothing since its job restarted, must
// not hold the stream's SystemWatermark at zero — or the receivers' dedup
// rows are never garbage-collected. The source never completes (an
// unbounded topic), so only the watermark can free the rows.
func TestSwiftSourceIdlePartitionDoesNotPinDedupGC(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := New(t, Options{Seed: 3, Messages: 300, Clock: clk, SwiftReader: true})
	h.Source.Infinite = true
	h.Source.Append("empty") // a partition with no record at all
	dedupRows := func() int { return dedupRowCount(ctx, t, h.Store) }
	counted := func() bool {
		c, _ := h.Counts(ctx)
		n := 0
		for _, v := range c {
			n += len(v)
		}
		return n == 300
	}
	advance := func() { clk.Advance(100 * time.Millisecond) } // past lease_check_period: idle jobs probe
	if err := h.RunUntil(ctx, 30*time.Second, counted, advance); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return dedupRows() == 0 }, advance); err != nil {
		t.Fatalf("dedup rows never collected (%d left): %v", dedupRows(), err)
	}
	// Jobs that restart and read nothing new must not pin it either.
	wm := h.Board.Control("Counter").InputSystemWM["words"]
	for _, w := range h.Workers {
		w.Restart()
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.Board.Control("Counter").InputSystemWM["words"] > wm }, advance); err != nil {
		t.Fatalf("SystemWatermark of words stuck at %d after the restart: %v", wm, err)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// gcCommits records when (by the store's clock) each dedup GC commit —
// one with a range deletion of a dedup table — was made.
type gcCommits struct {
	store.Store
	clk   clock.Clock
	mu    sync.Mutex
	times []time.Time
}

func (g *gcCommits) Commit(ctx context.Context, txn *store.Txn) error {
	for _, m := range txn.Mutations() {
		if m.Kind == store.DeleteRange && (m.Table == store.InputMessages || m.Table == store.CompactInputMessages) {
			g.mu.Lock()
			g.times = append(g.times, g.clk.Now())
			g.mu.Unlock()
			break
		}
	}
	return g.Store.Commit(ctx, txn)
}

// TestDedupGCAtMostOncePerPeriod: the controller deletes dedup rows below
// the watermarks at most once per dedupGCPeriod (1 s), not at every cycle
// the watermark moved: each deletion is a range tombstone, and every read
// of the store pays for the tombstones its memtable holds. It still
// deletes them all in the end.
func TestDedupGCAtMostOncePerPeriod(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var gc *gcCommits
	h := New(t, Options{Seed: 4, Messages: 600, Clock: clk, Wrap: func(st store.Store) store.Store {
		gc = &gcCommits{Store: st, clk: clk}
		return gc
	}})
	dedupRows := func() int { return dedupRowCount(ctx, t, h.Store) }
	// Cycles 10 ms of store time apart: the watermark moves at most of them.
	step := func() { clk.Advance(10 * time.Millisecond) }
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return dedupRows() == 0 }, step); err != nil {
		t.Fatalf("dedup rows never collected (%d left): %v", dedupRows(), err)
	}
	h.RequireExactlyOnce(ctx)
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if len(gc.times) == 0 {
		t.Fatal("no dedup GC commit")
	}
	for i := 1; i < len(gc.times); i++ {
		if d := gc.times[i].Sub(gc.times[i-1]); d < time.Second {
			t.Fatalf("dedup GC commits %d and %d were %v apart by the store's clock, want at least 1s (all: %v)", i-1, i, d, gc.times)
		}
	}
}
