package tables

import (
	"context"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// GCDedup deletes comp's dedup rows of stream below wm and records wm as
// the stream's dedup floor in the same commit. Rows below the watermark are
// redundant only while the filter treats messages below it as processed:
// the floor makes that hold for every later job, in this process or after a
// restart, even if the controller's recomputed watermark starts lower. The
// controller runs it; it needs no lease because it only removes rows the
// filter no longer reads.
func GCDedup(ctx context.Context, st store.Store, comp, stream string, wm store.Timestamp) error {
	txn := store.NewTxn()
	for _, compact := range []bool{false, true} {
		lo, hi := DedupBelow(comp, stream, wm)
		txn.DeleteRange(DedupTable(compact), lo, hi)
	}
	txn.Put(store.FlowState, DedupFloorKey(comp, stream), codec.AppendUint64BE(nil, uint64(wm)))
	return st.Commit(ctx, txn)
}

func DedupFloorKey(comp, stream string) []byte {
	return []byte("dedup_floor\x00" + comp + "\x00" + stream)
}

// DedupFloor returns the persisted dedup floor of (comp, stream): every
// message on stream below it is processed by comp (0 if none).
//
// Data directories written by versions that published "infinity" as the
// watermark of a completed computation hold the floor 2^63-1, which would
// make every later message look processed; such a floor is read as the
// store's current timestamp, which is above every message the completed
// run sent and below every message a later run sends.
func DedupFloor(ctx context.Context, st store.Store, comp, stream string) (store.Timestamp, error) {
	v, ok, err := st.Get(ctx, store.FlowState, DedupFloorKey(comp, stream))
	if err != nil || !ok {
		return 0, err
	}
	w, _, err := codec.Uint64BE(v)
	if err == nil && w == LegacyInfiniteFloor {
		return st.Timestamp(ctx)
	}
	return store.Timestamp(w), err
}

// LegacyInfiniteFloor is the floor older versions persisted for a
// completed computation's streams.
const LegacyInfiniteFloor = 1<<63 - 1
