package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// TestForgetSilentWorkers: the active controller removes the registration
// of a worker that answered no heartbeat for the configured time (counted
// from when it first saw the row, or from the last answer), keeps the
// others', and a deposed controller removes nothing. Before, the row of a
// worker that died without unregistering stayed for ever.
func TestForgetSilentWorkers(t *testing.T) {
	st, clk := testStore(t)
	ctx := context.Background()
	l, err := Campaign(ctx, st, LeaderRecord{ID: "c"}, time.Hour, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	fenced := Fence(st, l)
	p := NewPool(PoolConfig{Store: st})
	for _, r := range []Registration{{ID: "dead", Incarnation: 1}, {ID: "live", Incarnation: 2}} {
		if err := Register(ctx, st, r); err != nil {
			t.Fatal(err)
		}
		p.add(ctx, r)
	}
	answer := func(id string) {
		w := p.Worker(id)
		w.mu.Lock()
		w.lastBeat = st.Now()
		w.mu.Unlock()
	}
	g := &registrationGC{after: time.Minute, seen: map[Registration]time.Time{}}
	sweep := func() []string {
		t.Helper()
		removed, err := g.sweep(ctx, fenced, p, st.Now())
		if err != nil {
			t.Fatal(err)
		}
		return removed
	}
	registered := func(id string) bool {
		ok, err := Registered(ctx, st, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if r := sweep(); len(r) != 0 {
		t.Fatalf("removed %v at first sight", r)
	}
	clk.Advance(40 * time.Second)
	answer("live")
	if r := sweep(); len(r) != 0 {
		t.Fatalf("removed %v after 40s", r)
	}
	clk.Advance(30 * time.Second) // dead: 70s unheard; live: 30s since its answer
	if r := sweep(); len(r) != 1 || r[0] != "dead" || registered("dead") || !registered("live") {
		t.Fatalf("removed %v; dead registered %v, live registered %v", r, registered("dead"), registered("live"))
	}
	// The dead worker's id starts again (a new incarnation): a new
	// registration, not removed at once.
	if err := Register(ctx, st, Registration{ID: "dead", Incarnation: 3}); err != nil {
		t.Fatal(err)
	}
	if r := sweep(); len(r) != 0 {
		t.Fatalf("removed %v: a new registration", r)
	}
	// A deposed controller removes nothing.
	clk.Advance(2 * time.Hour)
	if _, err := g.sweep(ctx, fenced, p, st.Now()); store.Classify(err) != store.ClassLeaseLost {
		t.Fatalf("a deposed controller's sweep: %v", err)
	}
	if !registered("live") || !registered("dead") {
		t.Fatal("a deposed controller removed a registration")
	}
}

// TestWorkerRegistersAgain: a worker without heartbeats whose registration
// was removed (a controller forgot it while it was cut off) writes it
// again, with the same incarnation, so that a controller finds it once the
// network heals.
func TestWorkerRegistersAgain(t *testing.T) {
	st, _ := testStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := testWorker(t, st, WorkerConfig{LostTimeout: 40 * time.Millisecond})
	if err := Unregister(ctx, st, "w"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second) // a hang guard, far above the lost timeout
	for {
		regs, err := Registrations(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		if len(regs) == 1 && regs[0].ID == "w" && regs[0].Incarnation == w.Incarnation() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not register again: %+v", regs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
