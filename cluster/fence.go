package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// leasePrefix keys the flow_state rows recording the job leases the
// leaders created (one row per lease, deleted when it is aborted).
const leasePrefix = "cluster/leases/"

func leaseKey(id store.LeaseID) []byte {
	return binary.BigEndian.AppendUint64([]byte(leasePrefix), uint64(id))
}

// FencedStore is the store as the active controller uses it: every write
// it commits requires the leadership lease, and every job lease it creates
// is recorded under that lease before it is handed out. A deposed
// controller — a standby took over while it was paused or cut off — can
// therefore neither write (its commits fail: lease lost) nor start a job
// (the lease it just created is aborted when its record cannot be
// written); the new leader aborts every recorded lease when it takes over
// (AbortRecorded) but those of the jobs it adopts (adopt.go), so no other
// job of an earlier leader commits after that.
// Reads, pings and aborts pass through: pinging its jobs' leases cannot
// harm a successor, and aborting one only makes the successor replace a job
// it adopted, as it replaces any job whose lease is lost.
type FencedStore struct {
	store.Store
	leader store.LeaseID
	l      *Leadership
}

// Fence returns st fenced by the leadership lease.
func Fence(st store.Store, l *Leadership) *FencedStore {
	return &FencedStore{Store: st, leader: l.Record.Lease, l: l}
}

// Commit commits txn if the leadership lease is still alive.
func (f *FencedStore) Commit(ctx context.Context, txn *store.Txn) error {
	return f.Store.Commit(ctx, txn.Require(f.leader))
}

// CreateLease creates a job lease and records it under the leadership. If
// the record cannot be written the lease is aborted and the error
// returned: a controller that lost its leadership creates no live lease.
func (f *FencedStore) CreateLease(ctx context.Context, timeout time.Duration) (store.LeaseID, error) {
	id, err := f.Store.CreateLease(ctx, timeout)
	if err != nil {
		return 0, err
	}
	txn := store.NewTxn(f.leader)
	txn.Put(store.FlowState, leaseKey(id), nil)
	if err := f.Store.Commit(ctx, txn); err != nil {
		// Ambiguous or not, the abort settles it: the lease is dead.
		if aerr := f.Store.AbortLease(context.WithoutCancel(ctx), id); aerr != nil {
			return 0, fmt.Errorf("cluster: record lease %s: %w (and its abort failed: %v)", id, err, aerr)
		}
		return 0, fmt.Errorf("cluster: record lease %s: %w", id, err)
	}
	return id, nil
}

// AbortLease aborts the lease, then forgets its record (best effort: a
// record left behind is aborted again, harmlessly, by the next leader).
//
// A controller whose leadership ended — or whose own clock says it may have
// (no renewal for the lease timeout: a process frozen and thawed) — aborts
// nothing: its successor may have adopted the job, and a thawed controller
// that still believed its workers lost aborted their leases and made the
// new leader restart the jobs it had just adopted. This is a courtesy, not
// the fence: an abort is always safe.
func (f *FencedStore) AbortLease(ctx context.Context, id store.LeaseID) error {
	if f.l.expiredOnOwnClock() {
		return fmt.Errorf("cluster: not aborting %s: %w (%v)", id, ErrDeposed, f.l.Err())
	}
	if err := f.Store.AbortLease(ctx, id); err != nil {
		return err
	}
	txn := store.NewTxn(f.leader)
	txn.Delete(store.FlowState, leaseKey(id))
	_ = f.Store.Commit(ctx, txn)
	return nil
}

// Recorded returns the job leases recorded by leaders (live or not).
func (f *FencedStore) Recorded(ctx context.Context) (map[store.LeaseID]bool, error) {
	p := []byte(leasePrefix)
	ids := map[store.LeaseID]bool{}
	err := f.Store.Scan(ctx, store.Range{Table: store.FlowState, Lo: p, Hi: tables.PrefixEnd(p)}, func(k, _ []byte) bool {
		if len(k) == len(p)+8 {
			ids[store.LeaseID(binary.BigEndian.Uint64(k[len(p):]))] = true
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: list recorded leases: %w", err)
	}
	return ids, nil
}

// AbortRecorded aborts every job lease in recorded (Recorded's) but those
// in keep (the jobs a new leader adopts), each a barrier, and deletes their
// records. A new leader calls it before its controller starts: from then
// on no job of an earlier leader but those it adopted can commit. It
// returns how many leases it aborted.
func (f *FencedStore) AbortRecorded(ctx context.Context, recorded, keep map[store.LeaseID]bool) (int, error) {
	n := 0
	for id := range recorded {
		if keep[id] {
			continue
		}
		if err := f.AbortLease(ctx, id); err != nil {
			return n, fmt.Errorf("cluster: abort %s of an earlier leader: %w", id, err)
		}
		n++
	}
	return n, nil
}
