package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/weir-stream/weir/store"
)

// sequences implements store.Append: ordered tables whose rows get a dense
// index and a timestamp at commit. Each sequence (table, prefix) has a
// mutex, held by a committing Txn from index assignment until its write has
// returned, so indexes are dense and in commit order; different sequences
// commit (and group-commit) concurrently.
//
// The tail (next index) of a sequence is read from the store on first use
// and then cached. Invariant: while a sequence's mutex is free, its cached
// next index equals one past the largest committed index. A failed write
// breaks the Store (see apply), so a cached tail is never left ahead of the
// data by a failure that the handle survives.
type sequences struct {
	mu   sync.Mutex
	seqs map[string]*sequence
}

type sequence struct {
	mu     sync.Mutex
	loaded bool
	next   uint64

	// The published end (store.SequenceTails): one past the largest index
	// visible to reads, set once a commit's rows are visible and before the
	// commit returns, so it is never behind what a returned commit wrote.
	// Guarded by pmu, not mu: mu is held through a commit's write, and a
	// reader asking for the end must not wait for that.
	pmu   sync.Mutex
	known bool
	end   uint64
	grew  chan struct{} // closed when end grows; nil until someone waits
}

// publish records that the sequence's rows below end are visible.
func (q *sequence) publish(end uint64) {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if q.known && end <= q.end {
		return
	}
	q.known, q.end = true, end
	if q.grew != nil {
		close(q.grew)
		q.grew = nil
	}
}

// SequenceEnd implements store.SequenceTails.
func (s *Store) SequenceEnd(table store.Table, prefix []byte) (end uint64, ok bool) {
	end, _, ok = s.sequenceEnd(table, prefix, false)
	return end, ok
}

// WatchSequence implements store.SequenceTails.
func (s *Store) WatchSequence(table store.Table, prefix []byte) (end uint64, grew <-chan struct{}, ok bool) {
	return s.sequenceEnd(table, prefix, true)
}

// sequenceEnd is the published end of a sequence, and with watch a channel
// closed when it grows. Every append passes through this Store (Pebble
// allows one process per directory), so the cached tail is exact. A
// sequence not yet used by this handle has its tail read from the store
// once, unless a commit appending to it holds it at that moment (then ok
// is false and the caller reads).
func (s *Store) sequenceEnd(table store.Table, prefix []byte, watch bool) (end uint64, grew <-chan struct{}, ok bool) {
	if s.enter() != nil {
		return 0, nil, false
	}
	defer s.exit()
	var kb [64]byte
	q := s.seqs.lookup(appendRowKey(kb[:0], table, prefix))
	q.pmu.Lock()
	known := q.known
	q.pmu.Unlock()
	// A loaded sequence is published (lockSequences): only an unloaded one
	// needs its tail read here.
	if !known && q.mu.TryLock() {
		if !q.loaded {
			if next, err := s.loadTail(appendRowKey(kb[:0], table, prefix)); err == nil {
				q.next, q.loaded = next, true
				q.publish(next)
			}
		}
		q.mu.Unlock()
	}
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if !q.known {
		return 0, nil, false
	}
	if watch {
		if q.grew == nil {
			q.grew = make(chan struct{})
		}
		grew = q.grew
	}
	return q.end, grew, true
}

// lookup is get for a key in bytes, without allocating when the sequence
// exists.
func (q *sequences) lookup(key []byte) *sequence {
	q.mu.Lock()
	s, ok := q.seqs[string(key)]
	q.mu.Unlock()
	if ok {
		return s
	}
	return q.get(string(key))
}

func (q *sequences) get(key string) *sequence {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seqs == nil {
		q.seqs = map[string]*sequence{}
	}
	s, ok := q.seqs[key]
	if !ok {
		s = &sequence{}
		q.seqs[key] = s
	}
	return s
}

// lockSequences locks the sequences txn appends to, in key order (the
// order that prevents deadlocks between commits), loads their tails, and
// returns them keyed by sequence with an unlock function.
func (s *Store) lockSequences(txn *store.Txn) (map[string]*sequence, func(), error) {
	var keys []string
	seen := map[string]bool{}
	var scratch []byte
	for _, m := range txn.Mutations() {
		if m.Kind != store.Append {
			continue
		}
		scratch = appendRowKey(scratch[:0], m.Table, m.Key)
		if !seen[string(scratch)] { // (no allocation for the lookup)
			k := string(scratch)
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, func() {}, nil
	}
	sort.Strings(keys)
	locked := make(map[string]*sequence, len(keys))
	unlock := func() {
		for _, q := range locked {
			q.mu.Unlock()
		}
	}
	for _, k := range keys {
		q := s.seqs.get(k)
		q.mu.Lock()
		locked[k] = q
		if !q.loaded {
			next, err := s.loadTail([]byte(k))
			if err != nil {
				unlock()
				return nil, nil, err
			}
			q.next, q.loaded = next, true
			q.publish(next)
		}
	}
	return locked, unlock, nil
}

// publishTails publishes the tails of the locked sequences once the
// commit's batch is visible. REQUIRES: the sequences are locked.
func publishTails(locked map[string]*sequence) {
	for _, q := range locked {
		q.publish(q.next)
	}
}

// loadTail finds one past the largest index under the row-key prefix p.
func (s *Store) loadTail(p []byte) (uint64, error) {
	hi := append(append([]byte(nil), p...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: p, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("pebble store: sequence tail: %w", err)
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		k := it.Key()
		if len(k) == len(p)+8 && bytes.HasPrefix(k, p) {
			return binary.BigEndian.Uint64(k[len(p):]) + 1, nil
		}
	}
	return 0, it.Error()
}

// appendRows adds txn's appended rows to b with their indexes and
// timestamps, advancing the locked sequences' tails; undo restores the
// tails if the batch is not applied. REQUIRES: the sequences are locked.
func (s *Store) appendRows(b *pebbledb.Batch, txn *store.Txn, locked map[string]*sequence) (undo func(), err error) {
	n := 0
	for _, m := range txn.Mutations() {
		if m.Kind == store.Append {
			n++
		}
	}
	saved := make(map[*sequence]uint64, len(locked))
	for _, q := range locked {
		saved[q] = q.next
	}
	undo = func() {
		for q, next := range saved {
			q.next = next
		}
	}
	ts, err := s.issueTimestamps(n)
	if err != nil {
		return undo, err
	}
	// Batch.Set copies key and value: one scratch buffer serves them all.
	var key, val []byte
	for _, m := range txn.Mutations() {
		if m.Kind != store.Append {
			continue
		}
		key = appendRowKey(key[:0], m.Table, m.Key)
		q := locked[string(key)]
		key = binary.BigEndian.AppendUint64(key, q.next)
		val = binary.BigEndian.AppendUint64(val[:0], uint64(ts))
		val = append(val, m.Value...)
		if err := b.Set(key, val, nil); err != nil {
			return undo, err
		}
		q.next++
		ts++
	}
	return undo, nil
}
