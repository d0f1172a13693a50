package weir

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir/store"
)

// Context is what user code sees during one call: the current key, the
// epoch's time and the watermarks. The key's states are reached through
// State[T] with this Context. A Context is valid only during the call it
// was passed to.
type Context interface {
	// Context is cancelled when the job stops.
	Context() context.Context
	// Key is the key being processed.
	Key() Key
	// Now is the epoch's timestamp (the store's clock), the same for every
	// call in one epoch.
	Now() store.Timestamp
	// EventWatermark is the computation's current event-time watermark: every
	// input with an earlier event time is believed to have arrived.
	EventWatermark() time.Time
}

// Output collects the outputs of one call. Outputs of a Transform get fresh
// ids from the epoch's sequence number; outputs of a SwiftMap inherit the id
// of their single parent (or, with allow_batching_with_relaxed_guarantees, a
// merged id of several).
//
// An output the engine refuses (an undeclared stream, a parent that is not
// an input of the call, a timer on an unknown timer stream) returns an
// error and fails the call even if the code ignores that error: dropping
// the output silently would lose data.
type Output interface {
	// Add emits row on stream with the default parents: the current message,
	// the whole batch of a per-batch function, or the current timer.
	Add(stream string, row Row) error
	// AddWithParents emits row with explicit parents (lineage); parents must
	// be among the messages of the current call.
	AddWithParents(stream string, row Row, parents ...*Message) error
	// AddTimer registers a timer for the current key on a timer stream.
	AddTimer(stream string, req TimerRequest) error
	// Streams lists the computation's output streams in spec order, so that
	// reusable classes need not hard-code stream names.
	Streams() []string
}

// MessageFunc processes one message. A returned error or a panic fails the
// call: nothing of the epoch is committed, the partition's job fails and is
// restarted with backoff, and the error names the computation, the
// partition and the message (for a source message, its source partition and
// offset), so that a poison message can be found.
type MessageFunc func(ctx Context, msg *Message, out Output) error

// BatchFunc processes the messages of one key in one epoch, in processing
// order.
type BatchFunc func(ctx Context, msgs []*Message, out Output) error

// TimerFunc processes one fired timer.
type TimerFunc func(ctx Context, t *Timer, out Output) error

// Kind is the computation kind a class implements. Whether a computation
// reads a source (the OrderedSource variants of Flow) is decided by its spec:
// a Transform with a source stream is a TransformOrderedSource, a SwiftMap
// with a source stream is a SwiftOrderedSource.
type Kind int

const (
	// KindTransform: stateful, outputs materialized in the outbox before
	// delivery; may be non-deterministic; timers and sinks allowed.
	KindTransform Kind = iota + 1
	// KindSwiftMap: must be deterministic; outputs are not materialized and
	// inherit their parent's id; no sinks, no timers, no state (inputs are
	// deduplicated by watermark only, so a redelivered input would update
	// state twice: State access fails with an error).
	KindSwiftMap
)

func (k Kind) String() string {
	switch k {
	case KindTransform:
		return "Transform"
	case KindSwiftMap:
		return "SwiftMap"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Computation is user code of one class. Exactly one of OnMessage and
// OnMessages must be set; OnTimer is needed when the computation has timer
// streams.
type Computation struct {
	Kind       Kind
	OnMessage  MessageFunc
	OnMessages BatchFunc
	OnTimer    TimerFunc
	// Keyed declares that the class relies on its messages being grouped
	// by a key: it keeps per-key state (State[T]) or per-key timers. A spec
	// that gives a Keyed class neither group_by nor group_by_schema is
	// refused when it is loaded, because every message would share one key
	// and one state, which silently computes something else.
	Keyed bool
	// ExternalStateWrites names the external state tables the class writes
	// (ExternalState.Put and Delete). A spec whose computation of this
	// class does not list each of them under external_state_managers is
	// refused when it is loaded; a SwiftMap class may not declare any.
	// Classes that leave it empty are checked only when they write: a
	// write to a table the computation does not list fails the call.
	ExternalStateWrites []string
}

// Transform returns a Transform computation that processes one message at a time.
func Transform(fn MessageFunc) Computation {
	return Computation{Kind: KindTransform, OnMessage: fn}
}

// SwiftMap returns a SwiftMap computation that processes one message at a time.
func SwiftMap(fn MessageFunc) Computation {
	return Computation{Kind: KindSwiftMap, OnMessage: fn}
}

// Validate reports a malformed computation.
func (c Computation) Validate() error {
	switch {
	case c.Kind != KindTransform && c.Kind != KindSwiftMap:
		return fmt.Errorf("weir: computation kind %v is not Transform or SwiftMap", c.Kind)
	case c.OnMessage == nil && c.OnMessages == nil:
		return errors.New("weir: computation has neither OnMessage nor OnMessages")
	case c.OnMessage != nil && c.OnMessages != nil:
		return errors.New("weir: computation sets both OnMessage and OnMessages; choose one")
	case c.Kind == KindSwiftMap && len(c.ExternalStateWrites) > 0:
		return fmt.Errorf("weir: a SwiftMap may not write external state (ExternalStateWrites %v): its inputs are deduplicated by watermark only, so a redelivered input would apply a write twice; use a Transform", c.ExternalStateWrites)
	}
	return nil
}

// ErrDuplicateClass is returned when a class name is registered twice.
var ErrDuplicateClass = errors.New("weir: computation class already registered")

// Registry maps computation class names (spec computation_class_name) to
// user code. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	classes map[string]Computation
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{classes: make(map[string]Computation)} }

// Register adds a class. It fails if the name is taken or c is malformed.
func (r *Registry) Register(className string, c Computation) error {
	if className == "" {
		return errors.New("weir: empty computation class name")
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("class %s: %w", className, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.classes[className]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateClass, className)
	}
	r.classes[className] = c
	return nil
}

// MustRegister is Register for package initialisation; it panics on error,
// which can only be a programming error.
func (r *Registry) MustRegister(className string, c Computation) {
	if err := r.Register(className, c); err != nil {
		panic(err)
	}
}

// Lookup returns the class, if registered.
func (r *Registry) Lookup(className string) (Computation, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.classes[className]
	return c, ok
}

// Classes lists the registered class names, sorted.
func (r *Registry) Classes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.classes))
	for n := range r.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
