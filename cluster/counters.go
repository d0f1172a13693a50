package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/store"
)

// countersKey is the flow_state row holding the pipeline's counters as the
// last active controller knew them.
const countersKey = "cluster/counters"

// counterRow is the counters row. The pipeline's totals are Base plus the
// sum of Workers: Workers holds, per worker, the cumulative counters of its
// life (incarnation) as last heard — a worker reports its life's counts in
// every heartbeat, so the next controller must not add those again — and
// Base everything else (lives that ended, counts of earlier terms).
type counterRow struct {
	Term    uint64                    `json:"term"`
	Base    map[string]board.Counters `json:"base"`
	Workers map[string]lifeCounters   `json:"workers,omitempty"`
}

// lifeCounters are one worker life's cumulative counters.
type lifeCounters struct {
	Incarnation uint64                    `json:"incarnation"`
	Counters    map[string]board.Counters `json:"counters"`
}

// counterKeeper carries the pipeline's counters across terms, so that a new
// active controller's totals (its board's, hence /metrics and the console)
// go on from the last one's instead of restarting at what the live workers'
// current lives counted. At election it seeds the board with the stored
// row's totals and gives the pool each live worker's stored counts as the
// baseline of its life (Baseline); while it leads it stores the row every
// period through the fenced store (a deposed controller cannot). Counts a
// worker made after the last store and before it died are lost (at most a
// period's worth); nothing is counted twice.
type counterKeeper struct {
	term uint64

	mu sync.Mutex
	// carried are the stored lives this term has not heard from yet: their
	// counts are in the board's seed, and a heartbeat of the same life
	// adds only what it counted beyond them.
	carried map[string]lifeCounters
	// heard are the lives of this term's pool as last stored: a worker
	// that left the pool (its registration removed while it was cut off,
	// registrationGC) and comes back with the same life is not counted
	// twice.
	heard map[string]lifeCounters
}

// loadCounters reads the counters row, seeds b with its totals and returns
// the keeper of term.
func loadCounters(ctx context.Context, st store.Store, b *board.Board, term uint64) (*counterKeeper, error) {
	k := &counterKeeper{term: term, carried: map[string]lifeCounters{}, heard: map[string]lifeCounters{}}
	v, ok, err := st.Get(ctx, store.FlowState, []byte(countersKey))
	if err != nil {
		return nil, fmt.Errorf("cluster: read the counters: %w", err)
	}
	if !ok {
		return k, nil
	}
	var row counterRow
	if err := json.Unmarshal(v, &row); err != nil {
		return nil, fmt.Errorf("cluster: counters row: %w", err)
	}
	for comp, c := range row.Base {
		b.AddCounters(comp, c)
	}
	for id, l := range row.Workers {
		for comp, c := range l.Counters {
			b.AddCounters(comp, c)
		}
		k.carried[id] = l
	}
	return k, nil
}

// Baseline is PoolConfig.Baseline: the counts of worker id's life inc that
// the board holds already — its stored counts, if that is the stored life
// (once per worker), or its counts at this term's last store, if the pool
// dropped and re-added it — from which on the pool adds the life's growth.
func (k *counterKeeper) Baseline(id string, inc uint64) map[string]board.Counters {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.carried[id]
	if !ok {
		if h, ok := k.heard[id]; ok && h.Incarnation == inc {
			return h.Counters
		}
		return nil
	}
	delete(k.carried, id) // heard: a stored life of another incarnation ended
	if l.Incarnation != inc {
		return nil
	}
	return l.Counters
}

// snapshot returns the row describing the board's totals now: the lives
// the pool has heard, the stored lives not heard yet, and the rest as
// Base. The workers' locks are held while the board is read, so that no
// heartbeat adds between the two readings.
func (k *counterKeeper) snapshot(p *Pool) counterRow {
	ws := make([]*RemoteWorker, 0)
	for _, cw := range p.Workers() {
		ws = append(ws, cw.(*RemoteWorker))
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	row := counterRow{Term: k.term, Base: map[string]board.Counters{}, Workers: map[string]lifeCounters{}}
	for _, w := range ws {
		w.mu.Lock()
	}
	for _, w := range ws {
		if w.countersInc != 0 {
			row.Workers[w.id] = lifeCounters{Incarnation: w.countersInc, Counters: maps.Clone(w.counters)}
		}
	}
	total := p.cfg.Board.Counters()
	k.mu.Lock()
	for id, l := range row.Workers {
		k.heard[id] = l
	}
	for id, l := range k.carried {
		row.Workers[id] = l
	}
	k.mu.Unlock()
	for _, w := range ws {
		w.mu.Unlock()
	}
	for comp, c := range total {
		for _, l := range row.Workers {
			c = sub(c, l.Counters[comp])
		}
		row.Base[comp] = c
	}
	return row
}

// sub returns a − b, field by field (the inverse of board.Counters.Add):
// a life's growth since its last report, or the totals less the lives'.
func sub(a, b board.Counters) board.Counters {
	return board.Counters{Epochs: a.Epochs - b.Epochs, Commits: a.Commits - b.Commits, Inputs: a.Inputs - b.Inputs,
		Duplicates: a.Duplicates - b.Duplicates, Outputs: a.Outputs - b.Outputs,
		SinkDropped: a.SinkDropped - b.SinkDropped, DeadLettered: a.DeadLettered - b.DeadLettered}
}

// retire forgets the stored lives that cannot be heard any more — their
// worker's registration is gone or names another life — so that the row
// does not grow with every worker that ever ran: their counts move to
// Base at the next store.
func (k *counterKeeper) retire(regs []Registration) {
	live := make(map[string]uint64, len(regs))
	for _, r := range regs {
		live[r.ID] = r.Incarnation
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, l := range k.carried {
		if inc, ok := live[id]; !ok || inc != l.Incarnation {
			delete(k.carried, id)
		}
	}
}

// save stores the row through st (the fenced store: only the active
// controller's write lands), first retiring the stored lives the pool's
// last read of the registrations rules out (none before its first read:
// a life retired too early would be counted again when heard).
func (k *counterKeeper) save(ctx context.Context, st store.Store, p *Pool) error {
	if regs, ok := p.registrations(); ok {
		k.retire(regs)
	}
	v, _ := json.Marshal(k.snapshot(p))
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(countersKey), v)
	if err := st.Commit(ctx, txn); err != nil {
		return fmt.Errorf("cluster: store the counters: %w", err)
	}
	return nil
}

// run stores the row every period until ctx ends.
func (k *counterKeeper) run(ctx context.Context, st store.Store, p *Pool, period time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := k.save(ctx, st, p); err != nil && ctx.Err() == nil {
			logf("%v", err)
		}
	}
}
