// Package weir is the user API of weir, an exactly-once stream-processing
// engine for Go modelled on YTsaurus Flow.
//
// A pipeline is a set of computations joined by streams. Users write the
// computations' code against this package — a Transform (stateful; its
// outputs are materialized in an outbox, so it may be non-deterministic) or a
// SwiftMap (must be deterministic; nothing is materialized, outputs inherit
// their parent's id and are recomputed on replay) — register them by class
// name in a Registry, and describe the pipeline in a spec file (package spec)
// that names those classes. The engine (packages runtime, controller, engine)
// runs them so that every input message changes state and produces output
// exactly once, even when jobs crash, stall or are replaced.
//
// The guarantees and the rules user code must follow are those of Flow:
//
//   - Swift computations must be deterministic, output order and lineage
//     included: a replay must produce the same outputs from the same inputs.
//   - Transform computations may be non-deterministic: exactly one attempt is
//     applied atomically.
//   - Side effects outside weir (HTTP calls, files, external databases) are not
//     covered; make them idempotent with the message id as the key.
//   - State accessed through State is atomic with message processing.
package weir
