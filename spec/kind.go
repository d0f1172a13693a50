package spec

// Kind is a computation's kind. It is not written in the spec: it belongs to
// the class registered in code under the computation_class_name, so Validate
// learns it from a caller-supplied resolver and this package never hard-codes
// class names.
//
// The zero Kind is invalid, so a resolver that forgets to set it is caught.
type Kind int

const (
	// KindTransform is Flow's TTransformComputation: stateful, timers, sinks,
	// outputs materialized in the outbox, inputs deduplicated by message id.
	// No sources.
	KindTransform Kind = iota + 1
	// KindSwiftMap is Flow's TSwiftMapComputation: deterministic, nothing
	// materialized, output ids inherited from the parent. Needs input streams;
	// no sources, no sinks; timers only for state.
	KindSwiftMap
	// KindTransformOrderedSource is Flow's TTransformOrderedSourceComputation:
	// reads exactly one ordered source, outputs materialized. No input
	// streams, no key, no timers.
	KindTransformOrderedSource
	// KindSwiftOrderedSource is Flow's TSwiftOrderedSourceComputation: reads
	// exactly one ordered source deterministically, nothing materialized. No
	// input streams, no key, no timers.
	KindSwiftOrderedSource
)

// String returns the kind's name ("Transform", "SwiftMap", ...).
func (k Kind) String() string {
	switch k {
	case KindTransform:
		return "Transform"
	case KindSwiftMap:
		return "SwiftMap"
	case KindTransformOrderedSource:
		return "TransformOrderedSource"
	case KindSwiftOrderedSource:
		return "SwiftOrderedSource"
	}
	return "Kind(invalid)"
}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return k >= KindTransform && k <= KindSwiftOrderedSource }

// IsSource reports whether k reads an external source
// (TransformOrderedSource, SwiftOrderedSource).
func (k Kind) IsSource() bool { return k == KindTransformOrderedSource || k == KindSwiftOrderedSource }

// IsSwift reports whether k is a Swift kind (SwiftMap, SwiftOrderedSource):
// deterministic, outputs recomputed rather than materialized.
func (k Kind) IsSwift() bool { return k == KindSwiftMap || k == KindSwiftOrderedSource }

// IsTransformFamily reports whether k materializes its outputs (Transform,
// TransformOrderedSource); only these may relax processing_mode.
func (k Kind) IsTransformFamily() bool { return k == KindTransform || k == KindTransformOrderedSource }
