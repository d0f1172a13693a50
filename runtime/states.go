package runtime

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
)

// stateManager holds the per-key states touched in the current epoch: it
// loads a state from the states table on first use, caches the decoded
// value, and writes every changed state into the epoch transaction. Empty
// values are written as deletions (empty = absent).
type stateManager struct {
	st   store.Store
	comp string
	// cache survives epochs: a key's state is reloaded only after the job
	// restarts. Invariant: a cached value equals the committed one, or the
	// pending one of the current epoch (dirty).
	cache map[stateRef]*stateEntry
	dirty []*stateEntry
}

type stateRef struct {
	key  string // Key.Encoded
	name string
}

type stateEntry struct {
	key     weir.Key
	name    string
	value   any
	present bool
	// committed is the value before this epoch, restored if the epoch fails.
	committed        any
	committedPresent bool
	isDirty          bool
	empty            bool
	encode           func(any) ([]byte, error)
}

func newStateManager(st store.Store, comp string) *stateManager {
	return &stateManager{st: st, comp: comp, cache: map[stateRef]*stateEntry{}}
}

func (m *stateManager) load(ctx context.Context, k weir.Key, name string, decode func([]byte) (any, error)) (any, error) {
	ref := stateRef{k.Encoded, name}
	if e, ok := m.cache[ref]; ok {
		if !e.present {
			return nil, nil
		}
		return e.value, nil
	}
	b, ok, err := m.st.Get(ctx, store.States, stateKey(m.comp, k, name))
	if err != nil {
		return nil, fmt.Errorf("load state %s: %w", name, err)
	}
	e := &stateEntry{key: k, name: name}
	if ok {
		v, err := decode(b)
		if err != nil {
			return nil, err
		}
		e.value, e.present = v, true
	}
	e.committed, e.committedPresent = e.value, e.present
	m.cache[ref] = e
	return e.value, nil
}

func (m *stateManager) store(k weir.Key, name string, v any, empty bool, encode func(any) ([]byte, error)) {
	ref := stateRef{k.Encoded, name}
	e, ok := m.cache[ref]
	if !ok {
		// Written without being read: its committed value is unknown, so a
		// failed epoch must drop it from the cache rather than restore it.
		e = &stateEntry{key: k, name: name, committedPresent: false, committed: unknownState}
		m.cache[ref] = e
	}
	e.value, e.present, e.empty, e.encode = v, !empty, empty, encode
	if !e.isDirty {
		e.isDirty = true
		m.dirty = append(m.dirty, e)
	}
}

// unknownState marks a cache entry whose committed value was never loaded.
var unknownState = new(int)

// sync writes the dirty states into txn.
func (m *stateManager) sync(txn *store.Txn) error {
	for _, e := range m.dirty {
		key := stateKey(m.comp, e.key, e.name)
		if e.empty {
			txn.Delete(store.States, key)
			continue
		}
		b, err := e.encode(e.value)
		if err != nil {
			return err
		}
		txn.Put(store.States, key, b)
	}
	return nil
}

// committed marks the dirty states as committed.
func (m *stateManager) committed() {
	for _, e := range m.dirty {
		e.isDirty = false
		e.committed, e.committedPresent = e.value, e.present
	}
	m.dirty = m.dirty[:0]
}

// rollback restores the cache to the committed values after a failed epoch.
func (m *stateManager) rollback() {
	for _, e := range m.dirty {
		if e.committed == unknownState {
			delete(m.cache, stateRef{e.key.Encoded, e.name})
			continue
		}
		e.isDirty = false
		e.value, e.present = e.committed, e.committedPresent
	}
	m.dirty = m.dirty[:0]
}
