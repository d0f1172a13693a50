package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
)

// externalStates buffers one epoch's writes to external state tables
// (package externalstate) and adds them to the epoch transaction: the one
// seam between external state and the epoch. Reads see the committed rows
// overlaid by the epoch's buffered writes. A row read from the store and
// then written is written on condition that it is unchanged
// (CheckValue/CheckAbsent in the same transaction), so a read-modify-write
// racing another partition's commit fails the commit (store.ErrConflict)
// instead of losing an update.
//
// Invariant: between epochs the buffer is empty. Decide fills it, the
// commit writes it, committed clears it; a job whose Decide or Apply fails
// is discarded with its buffer.
type externalStates struct {
	st   store.Store
	comp *plan.CompPlan
	// writes are the buffered writes by store key (a nil row deletes).
	writes map[string]*extWrite
	// read holds, by store key, what the epoch read from the store (value
	// nil: absent), for the conflict checks of rows it then writes.
	read map[string][]byte
	// checked counts the writes of the pending commit that carry a check.
	checked int
	// undo, while set, logs what put and delete change (deadletter.go).
	undo *callUndo
}

type extWrite struct {
	table string
	row   map[string]any // nil: delete
	enc   []byte
}

// scanChunk is how many committed rows one store scan of ExternalScan
// reads before handing them to user code (no store iterator stays open
// while user code runs).
const scanChunk = 256

func newExternalStates(st store.Store, comp *plan.CompPlan) *externalStates {
	return &externalStates{st: st, comp: comp, writes: map[string]*extWrite{}, read: map[string][]byte{}}
}

// table returns the computation's access to table, or an error saying why
// it may not use it (for a write: write access).
func (e *externalStates) table(name string, write bool) (*externalstate.Table, error) {
	a, ok := e.comp.ExternalStates[name]
	switch {
	case write && e.comp.Swift():
		return nil, fmt.Errorf("weir: computation %s is a SwiftMap and may not write external state (%s): its inputs are deduplicated by watermark only, so a redelivered input would apply a write twice; use a Transform", e.comp.Name, name)
	case !ok:
		return nil, fmt.Errorf("weir: computation %s does not use external state table %q; list it under the computation's external_state_managers (to write) or external_state_joiners (to read)", e.comp.Name, name)
	case write && !a.Write:
		return nil, fmt.Errorf("weir: computation %s may only read external state table %s (external_state_joiners); list it under external_state_managers to write it", e.comp.Name, name)
	}
	return a.Table, nil
}

func (e *externalStates) get(ctx context.Context, name string, key []any) (map[string]any, bool, error) {
	t, err := e.table(name, false)
	if err != nil {
		return nil, false, err
	}
	enc, err := t.FullKey(key)
	if err != nil {
		return nil, false, err
	}
	sk := string(externalstate.RowKey(name, enc))
	if w, ok := e.writes[sk]; ok {
		return maps.Clone(w.row), w.row != nil, nil
	}
	row, raw, ok, err := externalstate.Get(ctx, e.st, name, enc)
	if err != nil {
		return nil, false, err
	}
	e.noteRead(sk, raw)
	return row, ok, nil
}

// noteRead remembers the first committed value the epoch saw of a row.
func (e *externalStates) noteRead(sk string, raw []byte) {
	if _, seen := e.read[sk]; !seen {
		e.read[sk] = raw
	}
}

func (e *externalStates) put(name string, row map[string]any) error {
	t, err := e.table(name, true)
	if err != nil {
		return err
	}
	key, norm, err := t.Prepare(row)
	if err != nil {
		return err
	}
	enc, err := externalstate.EncodeRow(norm)
	if err != nil {
		return fmt.Errorf("external state %s: %w", name, err)
	}
	e.write(string(externalstate.RowKey(name, key)), &extWrite{table: name, row: norm, enc: enc})
	return nil
}

func (e *externalStates) delete(name string, key []any) error {
	t, err := e.table(name, true)
	if err != nil {
		return err
	}
	enc, err := t.FullKey(key)
	if err != nil {
		return err
	}
	e.write(string(externalstate.RowKey(name, enc)), &extWrite{table: name})
	return nil
}

// write buffers w under store key sk.
func (e *externalStates) write(sk string, w *extWrite) {
	if e.undo != nil {
		prev, had := e.writes[sk]
		e.undo.noteExt(sk, prev, had)
	}
	e.writes[sk] = w
}

// scan visits the rows of [lo, hi) as the epoch sees them: the committed
// rows, read in chunks, merged in key order with the buffered writes.
func (e *externalStates) scan(ctx context.Context, name string, lo, hi []any, fn func(map[string]any) bool) error {
	t, err := e.table(name, false)
	if err != nil {
		return err
	}
	var loEnc, hiEnc []byte
	if len(lo) > 0 {
		if loEnc, err = t.EncodeKey(lo); err != nil {
			return err
		}
	}
	if len(hi) > 0 {
		if hiEnc, err = t.EncodeKey(hi); err != nil {
			return err
		}
	}
	from, to := externalstate.Span(name, loEnc, hiEnc)
	var buffered []string
	for sk := range e.writes {
		if sk >= string(from) && sk < string(to) {
			buffered = append(buffered, sk)
		}
	}
	sort.Strings(buffered)
	type committedRow struct {
		key string
		raw []byte
	}
	cursor := from
	for {
		var chunk []committedRow
		if err := e.st.Scan(ctx, store.Range{Table: store.ExternalStates, Lo: cursor, Hi: to, Limit: scanChunk}, func(k, v []byte) bool {
			chunk = append(chunk, committedRow{string(k), bytes.Clone(v)})
			return true
		}); err != nil {
			return fmt.Errorf("external state %s: scan: %w", name, err)
		}
		last := len(chunk) < scanChunk
		// Buffered writes up to the chunk's end (all of them after the last
		// chunk) merge with the chunk; the buffered row wins a tie.
		limit := string(to)
		if !last {
			limit = chunk[len(chunk)-1].key + "\x00"
		}
		i := 0
		emit := func(row map[string]any) bool { return row == nil || fn(row) }
		for _, c := range chunk {
			e.noteRead(c.key, c.raw)
			for i < len(buffered) && buffered[i] < c.key {
				if !emit(maps.Clone(e.writes[buffered[i]].row)) {
					return nil
				}
				i++
			}
			if i < len(buffered) && buffered[i] == c.key {
				i++
				if !emit(maps.Clone(e.writes[c.key].row)) {
					return nil
				}
				continue
			}
			row, err := externalstate.DecodeRow(c.raw)
			if err != nil {
				return fmt.Errorf("external state %s: row %x: %w", name, c.key, err)
			}
			if !fn(row) {
				return nil
			}
		}
		for i < len(buffered) && buffered[i] < limit {
			if !emit(maps.Clone(e.writes[buffered[i]].row)) {
				return nil
			}
			i++
		}
		buffered = buffered[i:]
		if last {
			return nil
		}
		cursor = []byte(limit)
	}
}

// sync adds the buffered writes to txn, in key order, each row the epoch
// read first guarded by a check that it is unchanged.
func (e *externalStates) sync(txn *store.Txn) {
	if len(e.writes) == 0 {
		return
	}
	keys := make([]string, 0, len(e.writes))
	for k := range e.writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.checked = 0
	for _, k := range keys {
		w := e.writes[k]
		if old, ok := e.read[k]; ok {
			e.checked++
			if old == nil {
				txn.CheckAbsent(store.ExternalStates, []byte(k))
			} else {
				txn.CheckValue(store.ExternalStates, []byte(k), old)
			}
		}
		if w.row == nil {
			txn.Delete(store.ExternalStates, []byte(k))
			externalstate.CountWrite(w.table, true)
		} else {
			txn.Put(store.ExternalStates, []byte(k), w.enc)
			externalstate.CountWrite(w.table, false)
		}
	}
}

// commitFailed records a commit that failed: a conflict with checked
// writes is counted as an external state conflict.
func (e *externalStates) commitFailed(err error) {
	if e.checked > 0 && errors.Is(err, store.ErrConflict) {
		externalstate.CountConflict(e.comp.Name)
	}
}

// committed empties the buffer after the epoch committed.
func (e *externalStates) committed() {
	clear(e.writes)
	clear(e.read)
	e.checked = 0
}

// rollback takes back the writes one call buffered (deadletter.go).
func (e *externalStates) rollback(u *callUndo) {
	for i := len(u.ext) - 1; i >= 0; i-- {
		x := u.ext[i]
		if x.had {
			e.writes[x.key] = x.prev
		} else {
			delete(e.writes, x.key)
		}
	}
}
