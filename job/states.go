package job

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// stateManager holds a job's per-key states: it loads a state from the
// states table on first use, caches the decoded value, and writes every
// state changed in an epoch into the epoch transaction. Empty values are
// written as deletions (empty = absent).
//
// The cache survives epochs, bounded by limit bytes (the computation's
// state_cache_byte_size_limit): after each commit clean entries are
// evicted until the cache fits, and are simply loaded again when next used
// — first those not used in the epoch just committed, then any (a CLOCK
// hand walks the entries; a use stamps the entry with the epoch, where a
// least-recently-used list would be relinked on every access). An entry
// changed in the current epoch is never evicted before its commit. Invariant: a cached value equals the committed one, or the
// pending one of the current epoch (dirty).
type stateManager struct {
	st    store.Store
	comp  string
	limit int

	cache map[stateRef]*stateEntry
	// ring holds the cached entries in CLOCK order (nil: a free slot, in
	// free); hand is where eviction looks next; epoch numbers the epochs
	// (entries' use stamps).
	ring  []*stateEntry
	free  []int
	hand  int
	epoch uint64
	bytes int
	// last is the entry of the last load or store: code that loads a
	// state and then stores it finds it without a second lookup.
	last  *stateEntry
	dirty []*stateEntry
	// scratch is the key buffer of point reads.
	scratch []byte
	// undo, while set, logs what store changes (deadletter.go).
	undo *callUndo
}

type stateRef struct {
	key  string // Key.Encoded
	name string
}

type stateEntry struct {
	ref     stateRef
	key     weir.Key
	value   any
	present bool
	isDirty bool
	empty   bool
	encode  func(any) ([]byte, error)
	// size estimates the entry's memory: its key and name, and the encoded
	// size of its value (as loaded, or as last written).
	size int
	// slot is the entry's place in the ring; used is the last epoch that
	// used it.
	slot int
	used uint64
}

// entryOverhead is a rough per-entry cost of the map, list and struct.
const entryOverhead = 160

func newStateManager(st store.Store, comp string, limit int) *stateManager {
	return &stateManager{st: st, comp: comp, limit: limit, cache: map[stateRef]*stateEntry{}}
}

// lookup returns the cached entry of ref and marks it used.
func (m *stateManager) lookup(ref stateRef) (*stateEntry, bool) {
	e := m.last
	if e == nil || e.ref != ref {
		var ok bool
		if e, ok = m.cache[ref]; !ok {
			return nil, false
		}
		m.last = e
	}
	e.used = m.epoch
	return e, true
}

func (m *stateManager) load(ctx context.Context, k weir.Key, name string, decode func([]byte) (any, error)) (any, error) {
	ref := stateRef{k.Encoded, name}
	if e, ok := m.lookup(ref); ok {
		if !e.present {
			return nil, nil
		}
		return e.value, nil
	}
	m.scratch = tables.AppendStateKey(m.scratch[:0], m.comp, k, name) // Get keeps no key
	b, ok, err := m.st.Get(ctx, store.States, m.scratch)
	if err != nil {
		return nil, fmt.Errorf("load state %s: %w", name, err)
	}
	e := &stateEntry{ref: ref, key: k}
	if ok {
		v, err := decode(b)
		if err != nil {
			return nil, err
		}
		e.value, e.present = v, true
	}
	m.insert(e, len(b))
	return e.value, nil
}

func (m *stateManager) insert(e *stateEntry, valueSize int) {
	e.size = entryOverhead + len(e.ref.key) + len(e.ref.name) + valueSize
	e.used = m.epoch
	if n := len(m.free); n > 0 {
		e.slot = m.free[n-1]
		m.free = m.free[:n-1]
		m.ring[e.slot] = e
	} else {
		e.slot = len(m.ring)
		m.ring = append(m.ring, e)
	}
	m.cache[e.ref] = e
	m.last = e
	m.bytes += e.size
}

// remove drops e from the cache.
func (m *stateManager) remove(e *stateEntry) {
	m.ring[e.slot] = nil
	m.free = append(m.free, e.slot)
	delete(m.cache, e.ref)
	if m.last == e {
		m.last = nil
	}
	m.bytes -= e.size
}

func (m *stateManager) store(k weir.Key, name string, v any, empty bool, encode func(any) ([]byte, error)) {
	ref := stateRef{k.Encoded, name}
	e, ok := m.lookup(ref)
	if !ok {
		// Written without being read: its size is known at sync.
		e = &stateEntry{ref: ref, key: k}
		m.insert(e, 0)
	}
	if m.undo != nil {
		m.undo.noteState(e, !ok)
	}
	e.value, e.present, e.empty, e.encode = v, !empty, empty, encode
	if !e.isDirty {
		e.isDirty = true
		m.dirty = append(m.dirty, e)
	}
}

// sync writes the dirty states into txn.
func (m *stateManager) sync(txn *store.Txn) error {
	// The epoch's keys share one block (the Txn keeps them until its
	// commit; each key is capacity-limited, and the block is never reused).
	block := make([]byte, 0, len(m.dirty)*(len(m.comp)+48))
	for _, e := range m.dirty {
		start := len(block)
		block = tables.AppendStateKey(block, m.comp, e.key, e.ref.name)
		key := block[start:len(block):len(block)]
		if e.empty {
			txn.Delete(store.States, key)
			m.resize(e, 0)
			continue
		}
		b, err := e.encode(e.value)
		if err != nil {
			return err
		}
		txn.Put(store.States, key, b)
		m.resize(e, len(b))
	}
	return nil
}

func (m *stateManager) resize(e *stateEntry, valueSize int) {
	size := entryOverhead + len(e.ref.key) + len(e.ref.name) + valueSize
	m.bytes += size - e.size
	e.size = size
}

// committed marks the dirty states as committed, then, while the cache is
// above its limit, evicts clean entries: in one turn of the hand those not
// used in this epoch, in a second turn any.
func (m *stateManager) committed() {
	for _, e := range m.dirty {
		e.isDirty = false
	}
	m.dirty = m.dirty[:0]
	n := len(m.ring)
	for step := 0; m.limit > 0 && m.bytes > m.limit && step < 2*n; step++ {
		if m.hand >= n {
			m.hand = 0
		}
		e := m.ring[m.hand]
		m.hand++
		if e != nil && !e.isDirty && (e.used < m.epoch || step >= n) {
			m.remove(e)
		}
	}
	m.epoch++
}

// cached returns the number of cached entries and their estimated bytes.
func (m *stateManager) cached() (int, int) { return len(m.cache), m.bytes }

// rollback takes back what one call changed (deadletter.go): entries it
// made dirty are clean again, entries it created are dropped, the others
// get their values from before the call.
func (m *stateManager) rollback(u *callUndo) {
	for _, e := range m.dirty[u.dirty:] {
		e.isDirty = false
	}
	m.dirty = m.dirty[:u.dirty]
	for i := len(u.states) - 1; i >= 0; i-- {
		s := u.states[i]
		if s.inserted {
			m.remove(s.e)
			continue
		}
		s.e.value, s.e.present, s.e.empty, s.e.encode = s.value, s.present, s.empty, s.encode
	}
}
