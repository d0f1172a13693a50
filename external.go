package weir

import (
	"errors"

	"github.com/weir-stream/weir/internal/userstate"
)

// ExternalState is an external state table (Flow's External state): a
// sorted table of rows in the pipeline's store, declared in the spec
// (external_states: key columns, optional value columns), that
// computations read and write by key. Writes are buffered during the
// epoch and committed in the epoch transaction, atomically with the
// epoch's inputs, outputs and state and fenced by the job's lease, so a
// replay never applies a write twice. Reads see the committed rows
// overlaid by the epoch's own writes. A computation writes only the tables
// its spec lists under external_state_managers, and reads those and its
// external_state_joiners; SwiftMap computations may not write.
//
// A row the epoch read and then writes is written only if no other commit
// changed it since the read: a concurrent read-modify-write of the same
// row by another partition fails the epoch (the job restarts and redoes
// it) instead of losing an update. Keep writers to disjoint keys — key the
// table by the computation's key, or give each computation its own key
// prefix — and they never conflict. See package externalstate.
type ExternalState struct {
	name string
}

// NewExternalState names an external state table declared in the spec.
func NewExternalState(table string) ExternalState { return ExternalState{name: table} }

// Name returns the table's name.
func (t ExternalState) Name() string { return t.name }

var errNoExternalState = errors.New("weir: this Context holds no external state: use the Context weir passed to your computation")

func externalHost(ctx Context) (userstate.ExternalHost, error) {
	h, ok := ctx.(userstate.ExternalHost)
	if !ok {
		return nil, errNoExternalState
	}
	return h, nil
}

// Get returns the row whose key columns hold key (one value per key
// column, in order), and whether it exists.
func (t ExternalState) Get(ctx Context, key ...any) (Row, bool, error) {
	h, err := externalHost(ctx)
	if err != nil {
		return nil, false, err
	}
	return h.ExternalGet(t.name, key)
}

// Put writes row, keyed by its key columns, when the epoch commits. A row
// that lacks a key column or has a column of the wrong type is refused
// with an error, and the call fails even if the code ignores it.
func (t ExternalState) Put(ctx Context, row Row) error {
	h, err := externalHost(ctx)
	if err != nil {
		return err
	}
	return h.ExternalPut(t.name, row)
}

// Delete removes the row with key when the epoch commits.
func (t ExternalState) Delete(ctx Context, key ...any) error {
	h, err := externalHost(ctx)
	if err != nil {
		return err
	}
	return h.ExternalDelete(t.name, key)
}

// Scan calls fn with the rows whose keys are in [lo, hi), in key order,
// until fn returns false. lo and hi are key prefixes (the first values of
// the key columns); nil or empty lo is the table's start, nil or empty hi
// its end. A prefix bound stands for the position just before the keys it
// begins: Scan(ctx, []any{uint64(5)}, []any{uint64(6)}, fn) visits every
// row whose first key column is 5.
func (t ExternalState) Scan(ctx Context, lo, hi []any, fn func(Row) bool) error {
	h, err := externalHost(ctx)
	if err != nil {
		return err
	}
	return h.ExternalScan(t.name, lo, hi, fn)
}
