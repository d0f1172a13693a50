// Package job runs one partition of a computation: a loop of epochs, each
// fetching a batch, deduplicating it, running user code, and committing
// everything the batch changed in one store transaction fenced by the
// job's lease (DESIGN.md §5; Flow's TTransformComputation order).
//
// # The life of an epoch
//
// An epoch is decided, then applied (epoch.go). Decide reads — the
// controller's control on the board, the transport's buffered inputs, due
// timers, a source batch, dedup rows, states — and runs user code; it
// changes the job's own memory and, outside it, only offers again the
// outputs of earlier, committed epochs that a full buffer refused (while
// one still refuses, the job takes no input). It returns a
// Decision: the transaction, the duplicates to acknowledge at once, the
// inputs processed, the outputs and their receiving partitions. Apply then
// carries it out in a fixed order: acknowledge duplicates; commit (the
// lease is a prerequisite; the partition_transactions row guards every
// attempt); report source offsets; let sinks start their sends; offer the
// outputs downstream; post the status; acknowledge the inputs upstream.
// The named crash points (CrashBeforeCommit, CrashAfterCommitBeforeAck,
// CrashAfterAckBeforeErase) are stops between those steps.
//
// # Files
//
//	job.go        Job, Config, New, Init (lease proof, restore), Run (the driver), Close
//	epoch.go      Decision, Decide, Apply: the epoch in Flow's order
//	deadletter.go dead_letter_stream: a failed call undone, its messages as dead
//	              letters; messages skipped by the operator (tables/skip.go)
//	usercode.go   the Context and Output user code sees; process (per key: timers,
//	              then messages); materialize (ids and meta of outputs and timers)
//	deliver.go    outputs to sinks and downstream partitions (an output only inline
//	              sinks take skips the outbox), acknowledgements in both directions
//	              (by the offer's token: no lookup by id), Swift acks
//	offers.go     an epoch's outputs offered per destination in batches; refused
//	              ones wait, and nothing overtakes them
//	report.go     the status a job posts on the board (watermark bounds, drained)
//	txmanager.go  the fenced, guarded commit and the idle lease probe
//	dedup.go      the input store: dedup by channel frontier or by id (exactly_once),
//	              and by watermark
//	outbox.go     materialized outputs until every destination acknowledged them
//	states.go     per-key states with a byte-bounded cache (CLOCK eviction)
//	extstate.go   the epoch's external state buffer: reads over it, its writes
//	              (guarded when read first) added to the epoch transaction
//	timers.go     timers: persisted, bounded, ordered by trigger
//	source.go     one source partition: position, memorized sequence numbers
//	swift.go      Swift lineage: a parent is acknowledged when its children are delivered
//	mintracker.go smallest in-flight SystemTimestamp per stream
//	applied.go    invariant check: no input applied twice
//
// Table layouts and record encodings are in package tables; the plan a job
// runs is package plan; the status exchange is package board.
package job
