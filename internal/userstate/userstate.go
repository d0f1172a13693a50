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
