package job

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// timerStore holds a partition's timers: all of them in memory (loaded at
// job start from the timers table, restricted to the partition's key-hash
// range) and persisted in the timers table. A fired timer is handed to user
// code and deleted in the same commit that records the result of processing
// it, so a timer's effect is applied exactly once: if the epoch fails, the
// timer is still in the table and fires again in the next job.
//
// Active timers are ordered by (trigger, id) in one min-heap per time type
// (event time, system time), so finding the due ones costs O(k log n) for k
// due timers, not a sort of every timer per epoch. Removal is lazy: a
// removed timer stays in its heap until it reaches the top.
//
// The count and estimated bytes of active timers are bounded (Flow's
// timer_store_count_limit and timer_store_byte_size_limit): registering a
// timer beyond them fails the epoch with an error naming the limit.
type timerStore struct {
	comp   string
	system map[string]bool // timer stream → fires by system time
	// countLimit and bytesLimit bound the active timers (0: unbounded).
	countLimit, bytesLimit int

	active map[msgid.ID]*timerEntry
	bytes  int
	// dedup of equal (stream, key, trigger): Flow keeps the smaller event time.
	byTrigger map[timerIdentity]msgid.ID
	// byEvent and bySystem order the active timers of each time type.
	byEvent, bySystem timerHeap

	added   []*timerEntry
	removed []*timerEntry
}

type timerEntry struct {
	t   weir.Timer
	key weir.Key
	// gone: removed from the active set; its heap slot is dropped lazily.
	gone bool
}

// size estimates a timer's memory: its strings and fixed fields.
func (e *timerEntry) size() int {
	return 96 + len(e.t.ID) + len(e.t.Stream) + len(e.key.Encoded)
}

type timerIdentity struct {
	stream  string
	key     string
	trigger int64
}

func newTimerStore(comp string, timers map[string]plan.TimerPlan, countLimit, bytesLimit int) *timerStore {
	sys := map[string]bool{}
	for name, tp := range timers {
		sys[name] = tp.SystemTime
	}
	return &timerStore{comp: comp, system: sys, countLimit: countLimit, bytesLimit: bytesLimit,
		active: map[msgid.ID]*timerEntry{}, byTrigger: map[timerIdentity]msgid.ID{}}
}

// load reads the persisted timers whose key hash is in [lo, hi).
func (s *timerStore) load(ctx context.Context, st store.Store, lo, hi uint64, toEnd bool) error {
	klo, khi := tables.KeyedRange(s.comp, lo, hi, toEnd)
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
	s.bytes += e.size()
	s.byTrigger[identity(e)] = e.t.ID
	if s.system[e.t.Stream] {
		heap.Push(&s.bySystem, e)
	} else {
		heap.Push(&s.byEvent, e)
	}
}

func identity(e *timerEntry) timerIdentity {
	return timerIdentity{stream: e.t.Stream, key: e.key.Encoded, trigger: e.t.TriggerTimestamp.UnixNano()}
}

// add registers a new timer (persisted at the next commit). An equal timer
// (same stream, key and trigger) is kept once, with the smaller event time.
// It fails if the partition would hold more timers than its limits allow.
func (s *timerStore) add(e *timerEntry) error {
	count, bytes := len(s.active)+1, s.bytes+e.size()
	var replaced *timerEntry
	if old, ok := s.byTrigger[identity(e)]; ok {
		if oe := s.active[old]; oe != nil {
			if !e.t.EventTimestamp.Before(oe.t.EventTimestamp) {
				return nil
			}
			replaced = oe
			count, bytes = count-1, bytes-oe.size()
		}
	}
	if s.countLimit > 0 && count > s.countLimit {
		return fmt.Errorf("computation %s: too many timers in memory: %d would be active, timer_store_count_limit is %d", s.comp, count, s.countLimit)
	}
	if s.bytesLimit > 0 && bytes > s.bytesLimit {
		return fmt.Errorf("computation %s: too many timers in memory: %d bytes would be active, timer_store_byte_size_limit is %d", s.comp, bytes, s.bytesLimit)
	}
	s.remove(replaced)
	s.insert(e)
	s.added = append(s.added, e)
	return nil
}

func (s *timerStore) remove(e *timerEntry) {
	if e == nil || e.gone {
		return
	}
	e.gone = true
	delete(s.active, e.t.ID)
	s.bytes -= e.size()
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
	for len(out) < max {
		ev, sys := s.byEvent.peekDue(eventWM), s.bySystem.peekDue(systemNow)
		var e *timerEntry
		switch {
		case ev != nil && (sys == nil || timerLess(ev, sys)):
			e = heap.Pop(&s.byEvent).(*timerEntry)
		case sys != nil:
			e = heap.Pop(&s.bySystem).(*timerEntry)
		default:
			return out
		}
		s.remove(e)
		out = append(out, e)
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
		txn.Delete(store.Timers, tables.TimerKey(s.comp, e.key, e.t.ID))
	}
	for _, e := range s.added {
		if added[e.t.ID] {
			txn.Put(store.Timers, tables.TimerKey(s.comp, e.key, e.t.ID), encodeTimer(e))
		}
	}
}

func (s *timerStore) committed() {
	clear(s.added)
	clear(s.removed)
	s.added = s.added[:0]
	s.removed = s.removed[:0]
}

func (s *timerStore) count() int { return len(s.active) }

func timerLess(a, b *timerEntry) bool {
	if !a.t.TriggerTimestamp.Equal(b.t.TriggerTimestamp) {
		return a.t.TriggerTimestamp.Before(b.t.TriggerTimestamp)
	}
	return a.t.ID < b.t.ID
}

// timerHeap is a min-heap of timers by (trigger, id).
type timerHeap []*timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return timerLess(h[i], h[j]) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(*timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// peekDue drops removed timers from the top and returns the earliest active
// timer if it is due at wm, else nil.
func (h *timerHeap) peekDue(wm time.Time) *timerEntry {
	for len(*h) > 0 && (*h)[0].gone {
		heap.Pop(h)
	}
	if len(*h) == 0 || (*h)[0].t.TriggerTimestamp.After(wm) {
		return nil
	}
	return (*h)[0]
}

func encodeTimer(e *timerEntry) []byte {
	b := []byte{tables.RecordVersion}
	b = codec.AppendString(b, string(e.t.ID))
	b = codec.AppendString(b, e.t.Stream)
	b = codec.AppendUvarint(b, e.key.Hash)
	b = codec.AppendString(b, e.key.Encoded)
	b = codec.AppendUvarint(b, tables.UnixNano(e.t.TriggerTimestamp))
	b = codec.AppendUvarint(b, tables.UnixNano(e.t.EventTimestamp))
	return codec.AppendUvarint(b, uint64(e.t.SystemTimestamp))
}

func decodeTimer(b []byte) (*timerEntry, error) {
	if len(b) == 0 || b[0] != tables.RecordVersion {
		return nil, fmt.Errorf("unknown timer record version")
	}
	r := tables.Reader{B: b[1:]}
	id, stream := r.Str(), r.Str()
	k := weir.Key{Hash: r.Uvarint(), Encoded: r.Str()}
	trig, ev, sys := r.Uvarint(), r.Uvarint(), r.Uvarint()
	if r.Err != nil {
		return nil, fmt.Errorf("decode timer: %w", r.Err)
	}
	return &timerEntry{key: k, t: weir.Timer{
		ID: msgid.ID(id), Stream: stream, Key: k,
		TriggerTimestamp: tables.FromUnixNano(trig), EventTimestamp: tables.FromUnixNano(ev),
		SystemTimestamp: store.Timestamp(sys),
	}}, nil
}
