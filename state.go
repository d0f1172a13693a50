package weir

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

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
	// enc and dec are s.encode and s.decode, bound once: a method value
	// made per call would allocate on every Get and Set.
	enc func(any) ([]byte, error)
	dec func([]byte) (any, error)
}

// NewState declares a state named name (unique within the computation).
func NewState[T any](name string) State[T] {
	s := State[T]{name: name}
	s.enc, s.dec = s.encode, s.decode
	return s
}

// codecs returns the bound encode and decode (a State declared as a zero
// value, without NewState, binds them per call).
func (s State[T]) codecs() (func(any) ([]byte, error), func([]byte) (any, error)) {
	if s.enc == nil {
		return s.encode, s.decode
	}
	return s.enc, s.dec
}

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
	_, dec := s.codecs()
	v, err := h.LoadState(s.name, dec)
	if err != nil || v == nil {
		return zero, err
	}
	return v.(T), nil
}

// Set sets the current key's value; the zero value clears it. With a
// Context weir did not make it does nothing (Get reports that).
func (s State[T]) Set(ctx Context, v T) {
	if h, ok := ctx.(userstate.Host); ok {
		enc, _ := s.codecs()
		h.StoreState(s.name, v, isZero(v), enc)
	}
}

// Clear removes the current key's value.
func (s State[T]) Clear(ctx Context) {
	var zero T
	if h, ok := ctx.(userstate.Host); ok {
		enc, _ := s.codecs()
		h.StoreState(s.name, zero, true, enc)
	}
}

// decode and encode use JSON; integers take a fast path that reads and
// writes the same bytes as encoding/json.
func (s State[T]) decode(b []byte) (any, error) {
	var v T
	switch p := any(&v).(type) {
	case *int64:
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			*p = n
			return v, nil
		}
	case *int:
		if n, err := strconv.ParseInt(string(b), 10, 0); err == nil {
			*p = int(n)
			return v, nil
		}
	case *uint64:
		if n, err := strconv.ParseUint(string(b), 10, 64); err == nil {
			*p = n
			return v, nil
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("state %s: decode: %w", s.name, err)
	}
	return v, nil
}

func (s State[T]) encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("state %s: encode: %w", s.name, err)
	}
	return b, nil
}

func isZero[T any](v T) bool {
	switch x := any(v).(type) {
	case int64:
		return x == 0
	case int:
		return x == 0
	case uint64:
		return x == 0
	case string:
		return x == ""
	}
	rv := reflect.ValueOf(&v).Elem()
	return rv.IsZero()
}
