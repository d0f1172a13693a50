package job

import (
	"container/list"
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
// state_cache_byte_size_limit): after each commit the least recently used
// clean entries are evicted until the cache fits, and are simply loaded
// again when next used. An entry changed in the current epoch is never
// evicted before its commit. Invariant: a cached value equals the committed
// one, or the pending one of the current epoch (dirty).
type stateManager struct {
	st    store.Store
	comp  string
	limit int

	cache map[stateRef]*stateEntry
	// lru orders cached entries by last use, most recent at the front.
	lru   list.List
	bytes int
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
	elem *list.Element
}

// entryOverhead is a rough per-entry cost of the map, list and struct.
const entryOverhead = 160

func newStateManager(st store.Store, comp string, limit int) *stateManager {
	return &stateManager{st: st, comp: comp, limit: limit, cache: map[stateRef]*stateEntry{}}
}

func (m *stateManager) load(ctx context.Context, k weir.Key, name string, decode func([]byte) (any, error)) (any, error) {
	ref := stateRef{k.Encoded, name}
	if e, ok := m.cache[ref]; ok {
		m.lru.MoveToFront(e.elem)
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
	e.elem = m.lru.PushFront(e)
	m.cache[e.ref] = e
	m.bytes += e.size
}

func (m *stateManager) store(k weir.Key, name string, v any, empty bool, encode func(any) ([]byte, error)) {
	ref := stateRef{k.Encoded, name}
	e, ok := m.cache[ref]
	if !ok {
		// Written without being read: its size is known at sync.
		e = &stateEntry{ref: ref, key: k}
		m.insert(e, 0)
	} else {
		m.lru.MoveToFront(e.elem)
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

// committed marks the dirty states as committed, then evicts the least
// recently used entries while the cache is above its limit.
func (m *stateManager) committed() {
	for _, e := range m.dirty {
		e.isDirty = false
	}
	m.dirty = m.dirty[:0]
	for m.limit > 0 && m.bytes > m.limit {
		back := m.lru.Back()
		if back == nil {
			break
		}
		e := back.Value.(*stateEntry)
		if e.isDirty {
			break // cannot happen after the loop above; kept for safety
		}
		m.lru.Remove(back)
		delete(m.cache, e.ref)
		m.bytes -= e.size
	}
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
			m.lru.Remove(s.e.elem)
			delete(m.cache, s.e.ref)
			m.bytes -= s.e.size
			continue
		}
		s.e.value, s.e.present, s.e.empty, s.e.encode = s.value, s.present, s.empty, s.encode
	}
}
