package cluster

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/store"
)

// TestCountersCarryAcrossTerms: the pipeline's counters go on across a
// change of term. Worker a's first life counted 10 and ended (a restarted:
// a new incarnation), b's life goes on; the next term's totals keep a's
// first life, do not count b's stored counts twice, and add what each life
// counts from then on. Before, a new term's board started from the live
// lives' counts only (here 10 instead of 20: a's first life was lost).
func TestCountersCarryAcrossTerms(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	heartbeat := func(p *Pool, id string, inc uint64, inputs uint64) {
		t.Helper()
		w := p.Worker(id)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.addCounters(&SyncReply{Worker: id, Incarnation: inc, Counters: map[string]board.Counters{"C": {Inputs: inputs}}})
	}
	term := func(n uint64, regs ...Registration) (*Pool, *counterKeeper) {
		t.Helper()
		for _, r := range regs {
			if err := Register(ctx, st, r); err != nil {
				t.Fatal(err)
			}
		}
		b := board.NewBoard()
		k, err := loadCounters(ctx, st, b, n)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPool(PoolConfig{Store: st, Board: b, Baseline: k.Baseline})
		for _, r := range regs {
			p.add(ctx, r)
		}
		p.removeGone(regs) // as Pool.Run after reading the registrations
		return p, k
	}
	total := func(p *Pool) uint64 { return p.cfg.Board.Counters()["C"].Inputs }

	p1, k1 := term(1, Registration{ID: "a", Incarnation: 1}, Registration{ID: "b", Incarnation: 1})
	heartbeat(p1, "a", 1, 10)
	heartbeat(p1, "b", 1, 5)
	if err := k1.save(ctx, st, p1); err != nil {
		t.Fatal(err)
	}
	if got := total(p1); got != 15 {
		t.Fatalf("term 1 counts %d, want 15", got)
	}

	// a restarted (incarnation 2); term 2 begins.
	p2, k2 := term(2, Registration{ID: "a", Incarnation: 2}, Registration{ID: "b", Incarnation: 1})
	if got := total(p2); got != 15 {
		t.Fatalf("term 2 starts at %d, want the stored 15", got)
	}
	// Stored before any heartbeat: the stored lives are carried, not
	// counted twice at the next term.
	if err := k2.save(ctx, st, p2); err != nil {
		t.Fatal(err)
	}
	heartbeat(p2, "b", 1, 7) // b's life counted 2 more
	heartbeat(p2, "a", 2, 3) // a's new life counted 3
	if got := total(p2); got != 20 {
		t.Fatalf("term 2 counts %d, want 10 (a's first life) + 7 (b) + 3 (a's second life) = 20", got)
	}
	if err := k2.save(ctx, st, p2); err != nil {
		t.Fatal(err)
	}

	// Term 3, nobody heard yet, then the same lives report again.
	p3, k3 := term(3, Registration{ID: "a", Incarnation: 2}, Registration{ID: "b", Incarnation: 1})
	heartbeat(p3, "a", 2, 4)
	heartbeat(p3, "b", 1, 7)
	if got := total(p3); got != 21 {
		t.Fatalf("term 3 counts %d, want 21", got)
	}
	if err := k3.save(ctx, st, p3); err != nil {
		t.Fatal(err)
	}
	// b's registration was removed while it was cut off (registrationGC),
	// the pool dropped it; b registers again with the same life.
	p3.removeGone([]Registration{{ID: "a", Incarnation: 2}})
	p3.add(ctx, Registration{ID: "b", Incarnation: 1})
	heartbeat(p3, "b", 1, 8)
	if got := total(p3); got != 22 {
		t.Fatalf("after b came back: %d, want 22 (its life counted once)", got)
	}
}

// TestCountersRetireGoneLives: a stored life whose worker's registration
// is gone (it drained, or was forgotten) moves to the row's Base at the
// next store, so that the row does not keep every worker that ever ran,
// and the totals stay; but not before the pool has read the registrations
// once: a live worker's stored life retired then would be counted again
// at its first heartbeat.
func TestCountersRetireGoneLives(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	a, b := Registration{ID: "a", Incarnation: 1}, Registration{ID: "b", Incarnation: 1}
	for _, r := range []Registration{a, b} {
		if err := Register(ctx, st, r); err != nil {
			t.Fatal(err)
		}
	}
	b1 := board.NewBoard()
	k1, err := loadCounters(ctx, st, b1, 1)
	if err != nil {
		t.Fatal(err)
	}
	p1 := NewPool(PoolConfig{Store: st, Board: b1, Baseline: k1.Baseline})
	for _, r := range []Registration{a, b} {
		p1.add(ctx, r)
		w := p1.Worker(r.ID)
		w.mu.Lock()
		w.addCounters(&SyncReply{Worker: r.ID, Incarnation: 1, Counters: map[string]board.Counters{"C": {Inputs: 10}}})
		w.mu.Unlock()
	}
	if err := k1.save(ctx, st, p1); err != nil {
		t.Fatal(err)
	}
	if err := Unregister(ctx, st, "b"); err != nil { // b drained
		t.Fatal(err)
	}
	row := func() counterRow {
		t.Helper()
		v, _, err := st.Get(ctx, store.FlowState, []byte(countersKey))
		if err != nil {
			t.Fatal(err)
		}
		var r counterRow
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	b2 := board.NewBoard()
	k2, err := loadCounters(ctx, st, b2, 2)
	if err != nil {
		t.Fatal(err)
	}
	p2 := NewPool(PoolConfig{Store: st, Board: b2, Baseline: k2.Baseline})
	p2.add(ctx, a)
	// Stored before the pool read the registrations: nothing retired.
	if err := k2.save(ctx, st, p2); err != nil {
		t.Fatal(err)
	}
	if r := row(); len(r.Workers) != 2 {
		t.Fatalf("lives retired before the pool read the registrations: %+v", r)
	}
	p2.removeGone([]Registration{a})
	if err := k2.save(ctx, st, p2); err != nil {
		t.Fatal(err)
	}
	r := row()
	if _, ok := r.Workers["b"]; ok || r.Base["C"].Inputs != 10 || r.Workers["a"].Counters["C"].Inputs != 10 {
		t.Fatalf("b's life not retired into Base: %+v", r)
	}
	w := p2.Worker("a")
	w.mu.Lock()
	w.addCounters(&SyncReply{Worker: "a", Incarnation: 1, Counters: map[string]board.Counters{"C": {Inputs: 12}}})
	w.mu.Unlock()
	if got := b2.Counters()["C"].Inputs; got != 22 {
		t.Fatalf("term 2 counts %d, want 10 (b) + 12 (a's life)", got)
	}
}
