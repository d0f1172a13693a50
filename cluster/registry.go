package cluster

import (
	"context"
	"encoding/json"
	"fmt"

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
	p := []byte(workerPrefix)
	var out []Registration
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.FlowState, Lo: p, Hi: tables.PrefixEnd(p)}, func(_, v []byte) bool {
		var r Registration
		if err := json.Unmarshal(v, &r); err != nil {
			derr = fmt.Errorf("cluster: worker row: %w", err)
			return false
		}
		out = append(out, r)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}
