package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// workerPrefix keys the flow_state rows of registered workers.
const workerPrefix = "cluster/workers/"

// Registration is a worker's row: written when the worker process starts,
// so that controllers find it. Its liveness is not in the row but in the
// controller's heartbeats (Sync): a worker that answers them is alive.
type Registration struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// Incarnation identifies the process's life: a store timestamp taken
	// at start, so a restarted worker has a larger one.
	Incarnation uint64 `json:"incarnation"`
	// Version is the worker's ProtocolVersion (absent: 1), and Release its
	// build's release, for status.
	Version int    `json:"version,omitempty"`
	Release string `json:"release,omitempty"`
}

// Register writes (or replaces) the worker's row.
func Register(ctx context.Context, st store.Store, r Registration) error {
	v, _ := json.Marshal(r)
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(workerPrefix+r.ID), v)
	if err := st.Commit(ctx, txn); err != nil {
		return fmt.Errorf("cluster: register worker %s: %w", r.ID, err)
	}
	return nil
}

// Unregister removes the worker's row (a clean exit).
func Unregister(ctx context.Context, st store.Store, id string) error {
	txn := store.NewTxn()
	txn.Delete(store.FlowState, []byte(workerPrefix+id))
	return st.Commit(ctx, txn)
}

// Registrations lists the registered workers in id order.
func Registrations(ctx context.Context, st store.Store) ([]Registration, error) {
	rows, err := registrationRows(ctx, st)
	out := make([]Registration, len(rows))
	for i, r := range rows {
		out[i] = r.Registration
	}
	return out, err
}

// registrationRow is a registration with its row's bytes.
type registrationRow struct {
	Registration
	raw []byte
}

func registrationRows(ctx context.Context, st store.Store) ([]registrationRow, error) {
	p := []byte(workerPrefix)
	var out []registrationRow
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.FlowState, Lo: p, Hi: tables.PrefixEnd(p)}, func(_, v []byte) bool {
		var r Registration
		if err := json.Unmarshal(v, &r); err != nil {
			derr = fmt.Errorf("cluster: worker row: %w", err)
			return false
		}
		out = append(out, registrationRow{Registration: r, raw: append([]byte(nil), v...)})
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// Registered reports whether worker id has a registration row.
func Registered(ctx context.Context, st store.Store, id string) (bool, error) {
	_, ok, err := st.Get(ctx, store.FlowState, []byte(workerPrefix+id))
	return ok, err
}

// DefaultForgetWorkersAfter is how long the active controller keeps the
// registration of a worker that answers no heartbeat (ControllerConfig.
// ForgetWorkersAfter).
const DefaultForgetWorkersAfter = 10 * time.Minute

// registrationGC removes the registrations of workers that answered no
// heartbeat of the active controller for after: a worker that died
// without unregistering (SIGKILL, a lost machine) otherwise stays in
// flow_state, in the pool and in /status for ever, its heartbeats tried
// in vain. A worker alive but cut off for that long registers again once
// it notices its row is gone (Worker.Run), with the same incarnation.
type registrationGC struct {
	after time.Duration
	// seen is when this controller first saw each registration (worker
	// id and incarnation): the silence of a worker never heard counts from
	// then.
	seen map[Registration]time.Time
}

// sweep removes, through st (the fenced store), the rows of the workers
// of p silent for g.after by the store's clock now; a row that changed
// since it was read (the worker registered again) stays. It returns the
// ids removed.
func (g *registrationGC) sweep(ctx context.Context, st store.Store, p *Pool, now time.Time) ([]string, error) {
	rows, err := registrationRows(ctx, p.cfg.Store)
	if err != nil {
		return nil, err
	}
	live := make(map[Registration]bool, len(rows))
	var removed []string
	for _, r := range rows {
		live[r.Registration] = true
		first, ok := g.seen[r.Registration]
		if !ok {
			g.seen[r.Registration] = now
			continue
		}
		silent := first
		if w := p.Worker(r.ID); w != nil {
			if lb := w.LastHeartbeat(); lb.After(silent) {
				silent = lb
			}
		}
		if now.Sub(silent) < g.after {
			continue
		}
		txn := store.NewTxn()
		txn.CheckValue(store.FlowState, []byte(workerPrefix+r.ID), r.raw)
		txn.Delete(store.FlowState, []byte(workerPrefix+r.ID))
		if err := st.Commit(ctx, txn); err != nil {
			if store.Classify(err) == store.ClassLeaseLost {
				return removed, err
			}
			continue // changed meanwhile, or retried at the next sweep
		}
		delete(g.seen, r.Registration)
		removed = append(removed, r.ID)
	}
	for r := range g.seen {
		if !live[r] {
			delete(g.seen, r)
		}
	}
	return removed, nil
}
