package weir

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/weir-stream/weir/internal/userstate"
)

// State is a typed per-key state of a computation, persisted in the states
// table. It is loaded when first used in an epoch and written when the epoch
// commits, atomically with the epoch's outputs, so a message's effect on
// state is applied exactly once. A value equal to T's zero value is "empty":
// its row is deleted, and Get of an absent state returns the zero value.
//
// Values are stored as JSON, so T must round-trip through encoding/json.
type State[T any] struct {
	name string
}

// NewState declares a state named name (unique within the computation).
func NewState[T any](name string) State[T] { return State[T]{name: name} }

// Name returns the state's name.
func (s State[T]) Name() string { return s.name }

// errNoState is returned for a Context that holds no state (one the
// engine did not make).
var errNoState = errors.New("weir: this Context holds no state: use the Context weir passed to your computation")

// Get returns the current key's value, or T's zero value if absent.
func (s State[T]) Get(ctx Context) (T, error) {
	var zero T
	h, ok := ctx.(userstate.Host)
	if !ok {
		return zero, errNoState
	}
	v, err := h.LoadState(s.name, s.decode)
	if err != nil || v == nil {
		return zero, err
	}
	return v.(T), nil
}

// Set sets the current key's value; the zero value clears it. With a
// Context weir did not make it does nothing (Get reports that).
func (s State[T]) Set(ctx Context, v T) {
	if h, ok := ctx.(userstate.Host); ok {
		h.StoreState(s.name, v, isZero(v), s.encode)
	}
}

// Clear removes the current key's value.
func (s State[T]) Clear(ctx Context) {
	var zero T
	if h, ok := ctx.(userstate.Host); ok {
		h.StoreState(s.name, zero, true, s.encode)
	}
}

func (s State[T]) decode(b []byte) (any, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("state %s: decode: %w", s.name, err)
	}
	return v, nil
}

func (s State[T]) encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("state %s: encode: %w", s.name, err)
	}
	return b, nil
}

func isZero[T any](v T) bool {
	rv := reflect.ValueOf(&v).Elem()
	return rv.IsZero()
}
