package runtime

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// timerStore holds a partition's timers: all of them in memory (loaded at
// job start from the timers table, restricted to the partition's key-hash
// range) and persisted in the timers table. A fired timer is handed to user
// code and deleted in the same commit that records the result of processing
// it, so a timer's effect is applied exactly once: if the epoch fails, the
// timer is still in the table and fires again in the next job.
type timerStore struct {
	comp   string
	system map[string]bool // timer stream → fires by system time

	active map[msgid.ID]*timerEntry
	// dedup of equal (stream, key, trigger): Flow keeps the smaller event time.
	byTrigger map[timerIdentity]msgid.ID

	added   []*timerEntry
	removed []*timerEntry
}

type timerEntry struct {
	t   weir.Timer
	key weir.Key
}

type timerIdentity struct {
	stream  string
	key     string
	trigger int64
}

func newTimerStore(comp string, timers map[string]TimerPlan) *timerStore {
	sys := map[string]bool{}
	for name, tp := range timers {
		sys[name] = tp.SystemTime
	}
	return &timerStore{comp: comp, system: sys, active: map[msgid.ID]*timerEntry{}, byTrigger: map[timerIdentity]msgid.ID{}}
}

// load reads the persisted timers whose key hash is in [lo, hi).
func (s *timerStore) load(ctx context.Context, st store.Store, lo, hi uint64, toEnd bool) error {
	klo, khi := hashRangeKeys(s.comp, lo, hi, toEnd)
	var decodeErr error
	err := st.Scan(ctx, store.Range{Table: store.Timers, Lo: klo, Hi: khi}, func(k, v []byte) bool {
		e, err := decodeTimer(v)
		if err != nil {
			decodeErr = fmt.Errorf("timer row %q: %w", k, err)
			return false
		}
		s.insert(e)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return err
}

func (s *timerStore) insert(e *timerEntry) {
	s.active[e.t.ID] = e
	s.byTrigger[identity(e)] = e.t.ID
}

func identity(e *timerEntry) timerIdentity {
	return timerIdentity{stream: e.t.Stream, key: e.key.Encoded, trigger: e.t.TriggerTimestamp.UnixNano()}
}

// add registers a new timer (persisted at the next commit). An equal timer
// (same stream, key and trigger) is kept once, with the smaller event time.
func (s *timerStore) add(e *timerEntry) {
	if old, ok := s.byTrigger[identity(e)]; ok {
		if oe := s.active[old]; oe != nil && !e.t.EventTimestamp.Before(oe.t.EventTimestamp) {
			return
		}
		s.remove(s.active[old])
	}
	s.insert(e)
	s.added = append(s.added, e)
}

func (s *timerStore) remove(e *timerEntry) {
	if e == nil {
		return
	}
	delete(s.active, e.t.ID)
	if s.byTrigger[identity(e)] == e.t.ID {
		delete(s.byTrigger, identity(e))
	}
	s.removed = append(s.removed, e)
}

// due returns up to max timers whose trigger is at or below the watermark
// of their time type, ordered by (trigger, id), and removes them from the
// active set (their deletion is written at the next commit).
func (s *timerStore) due(eventWM, systemNow time.Time, max int) []*timerEntry {
	var out []*timerEntry
	for _, e := range s.active {
		wm := eventWM
		if s.system[e.t.Stream] {
			wm = systemNow
		}
		if !e.t.TriggerTimestamp.After(wm) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].t, out[j].t
		if !a.TriggerTimestamp.Equal(b.TriggerTimestamp) {
			return a.TriggerTimestamp.Before(b.TriggerTimestamp)
		}
		return a.ID < b.ID
	})
	if len(out) > max {
		out = out[:max]
	}
	for _, e := range out {
		s.remove(e)
	}
	return out
}

// sync writes added timers and deletes fired ones; a timer added and fired
// within the same epoch touches nothing.
func (s *timerStore) sync(txn *store.Txn) {
	added := map[msgid.ID]bool{}
	for _, e := range s.added {
		added[e.t.ID] = true
	}
	for _, e := range s.removed {
		if added[e.t.ID] {
			delete(added, e.t.ID)
			continue
		}
		txn.Delete(store.Timers, timerKey(s.comp, e.key, e.t.ID))
	}
	for _, e := range s.added {
		if added[e.t.ID] {
			txn.Put(store.Timers, timerKey(s.comp, e.key, e.t.ID), encodeTimer(e))
		}
	}
}

func (s *timerStore) committed() {
	s.added = s.added[:0]
	s.removed = s.removed[:0]
}

func (s *timerStore) count() int { return len(s.active) }

func encodeTimer(e *timerEntry) []byte {
	b := []byte{recordVersion}
	b = codec.AppendString(b, string(e.t.ID))
	b = codec.AppendString(b, e.t.Stream)
	b = codec.AppendUvarint(b, e.key.Hash)
	b = codec.AppendString(b, e.key.Encoded)
	b = codec.AppendUvarint(b, unixNano(e.t.TriggerTimestamp))
	b = codec.AppendUvarint(b, unixNano(e.t.EventTimestamp))
	return codec.AppendUvarint(b, uint64(e.t.SystemTimestamp))
}

func decodeTimer(b []byte) (*timerEntry, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, fmt.Errorf("unknown timer record version")
	}
	r := reader{b: b[1:]}
	id, stream := r.str(), r.str()
	k := weir.Key{Hash: r.uvarint(), Encoded: r.str()}
	trig, ev, sys := r.uvarint(), r.uvarint(), r.uvarint()
	if r.err != nil {
		return nil, fmt.Errorf("decode timer: %w", r.err)
	}
	return &timerEntry{key: k, t: weir.Timer{
		ID: msgid.ID(id), Stream: stream, Key: k,
		TriggerTimestamp: fromUnixNano(trig), EventTimestamp: fromUnixNano(ev),
		SystemTimestamp: store.Timestamp(sys),
	}}, nil
}
