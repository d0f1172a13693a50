// Package userstate is the seam between weir.State and the engine: the
// Context the engine passes to user code implements Host, and State[T]
// reaches the key's state through it. It is internal so that
// weir.Context lists only what user code may call.
package userstate

// Host gives access to the current key's states during one user-code call.
type Host interface {
	// LoadState returns the decoded value of state name for the current
	// key, or (nil, nil) if absent. decode turns stored bytes into a
	// value; the engine caches the value for the rest of the epoch.
	LoadState(name string, decode func([]byte) (any, error)) (any, error)
	// StoreState sets state name of the current key to v; empty means the
	// state is absent (its row is deleted). encode runs once, at commit.
	StoreState(name string, v any, empty bool, encode func(any) ([]byte, error))
}

// ExternalHost gives access to the computation's external state tables
// (package externalstate) during one user-code call. Rows are column maps
// holding the key columns too; key values are in key column order, and a
// shorter key is a key prefix (Scan's bounds).
type ExternalHost interface {
	// ExternalGet returns the row with this key, as the epoch sees it: its
	// own buffered write if it made one, else the committed row.
	ExternalGet(table string, key []any) (map[string]any, bool, error)
	// ExternalPut buffers a write of row (keyed by its key columns).
	ExternalPut(table string, row map[string]any) error
	// ExternalDelete buffers a deletion of the row with this key.
	ExternalDelete(table string, key []any) error
	// ExternalScan calls fn for the rows with keys in [lo, hi) in key
	// order, as the epoch sees them, until fn returns false.
	ExternalScan(table string, lo, hi []any, fn func(row map[string]any) bool) error
}
