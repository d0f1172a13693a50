package job

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
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
			_, ok, err := s.st.Get(ctx, tables.DedupTable(s.compact), tables.DedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID))
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
	t := tables.DedupTable(s.compact)
	for _, m := range msgs {
		txn.Put(t, tables.DedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID), nil)
	}
}

// loadFloors raises the watermarks to the persisted dedup floors.
func (s *inputStore) loadFloors(ctx context.Context, streams []string) error {
	for _, stream := range streams {
		w, err := tables.DedupFloor(ctx, s.st, s.comp, stream)
		if err != nil {
			return fmt.Errorf("read dedup floor of %s/%s: %w", s.comp, stream, err)
		}
		s.advance(stream, w)
	}
	return nil
}
