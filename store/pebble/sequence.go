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
		}
	}
	return locked, unlock, nil
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
