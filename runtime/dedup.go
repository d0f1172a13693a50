package runtime

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// inputStore is a computation partition's view of its dedup table
// (input_messages or compact_input_messages): which inputs were already
// processed. An input is processed if its row exists, or if its
// SystemTimestamp is below the input stream's SystemWatermark — the
// controller garbage-collects rows below the watermark, and the watermark
// test stands in for them (Flow's TInputStore.Filter).
//
// In at_least_once_consistent mode (checkState false) only the watermark
// test runs: no reads, no writes.
type inputStore struct {
	st         store.Store
	comp       string
	compact    bool
	checkState bool
	// watermarks holds the SystemWatermark of each input stream, as last
	// published by the controller. It only grows.
	watermarks map[string]store.Timestamp
}

func newInputStore(st store.Store, comp string, compact, checkState bool) *inputStore {
	return &inputStore{st: st, comp: comp, compact: compact, checkState: checkState, watermarks: map[string]store.Timestamp{}}
}

// advance raises stream's SystemWatermark to wm (never lowers it).
func (s *inputStore) advance(stream string, wm store.Timestamp) {
	if wm > s.watermarks[stream] {
		s.watermarks[stream] = wm
	}
}

// filter splits msgs into fresh ones and ones already processed. Duplicate
// ids within msgs count as processed after their first occurrence. Only
// suspect messages (those that may have been delivered before, see
// transport.Delivery) are looked up in the dedup table: a message delivered
// for the first time cannot be in it.
func (s *inputStore) filter(ctx context.Context, msgs []*weir.Message, suspect map[msgid.ID]bool) (fresh, processed []*weir.Message, err error) {
	seen := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		if seen[string(m.ID)] || m.SystemTimestamp < s.watermarks[m.Stream] {
			processed = append(processed, m)
			continue
		}
		seen[string(m.ID)] = true
		if s.checkState && suspect[m.ID] {
			_, ok, err := s.st.Get(ctx, dedupTable(s.compact), dedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID))
			if err != nil {
				return nil, nil, fmt.Errorf("dedup lookup of %s: %w", m.ID, err)
			}
			if ok {
				processed = append(processed, m)
				continue
			}
		}
		fresh = append(fresh, m)
	}
	return fresh, processed, nil
}

// register adds the ids of processed inputs to txn (exactly_once only).
func (s *inputStore) register(txn *store.Txn, msgs []*weir.Message) {
	if !s.checkState {
		return
	}
	t := dedupTable(s.compact)
	for _, m := range msgs {
		txn.Put(t, dedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID), nil)
	}
}

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
		lo, hi := dedupBelow(comp, stream, wm)
		txn.DeleteRange(dedupTable(compact), lo, hi)
	}
	txn.Put(store.FlowState, dedupFloorKey(comp, stream), codec.AppendUint64BE(nil, uint64(wm)))
	return st.Commit(ctx, txn)
}

func dedupFloorKey(comp, stream string) []byte {
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
	v, ok, err := st.Get(ctx, store.FlowState, dedupFloorKey(comp, stream))
	if err != nil || !ok {
		return 0, err
	}
	w, _, err := codec.Uint64BE(v)
	if err == nil && w == legacyInfiniteFloor {
		return st.Timestamp(ctx)
	}
	return store.Timestamp(w), err
}

// legacyInfiniteFloor is the floor older versions persisted for a
// completed computation's streams.
const legacyInfiniteFloor = 1<<63 - 1

// loadFloors raises the watermarks to the persisted dedup floors.
func (s *inputStore) loadFloors(ctx context.Context, streams []string) error {
	for _, stream := range streams {
		w, err := DedupFloor(ctx, s.st, s.comp, stream)
		if err != nil {
			return fmt.Errorf("read dedup floor of %s/%s: %w", s.comp, stream, err)
		}
		s.advance(stream, w)
	}
	return nil
}
