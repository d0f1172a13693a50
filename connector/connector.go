// Package connector defines the contracts between the engine and the
// systems a pipeline reads from (sources) and writes to (sinks), and holds
// the registry of connector classes named in specs (source_class_name,
// sink_class_name).
//
// Sources are ordered and partitioned (a queue's tablets, a Kafka topic's
// partitions). Their offsets advance only with the epoch commit: a source
// partition's position is part of the partition state written in the same
// store transaction as the epoch's state and outputs.
//
// Sinks follow Flow's ISink: Distribute hands an output to the sink, Sync
// adds the sink's writes and state to the epoch transaction, Commit runs
// after the epoch committed (asynchronous sends may start only then). Three
// bases implement the guarantee classes: SyncSink (writes inside the epoch
// transaction: exactly-once), OrderedAsyncSink (transactional outbox +
// (producer_id, seqNo) dedup on the receiver: exactly-once when the receiver
// deduplicates, at-least-once otherwise), and AtMostOnceSink (bounded memory
// queue, drops on overflow).
package connector

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/store"
)

// Offset is a position in one source partition. Offsets of a partition
// increase; gaps are allowed (Kafka transaction markers, compaction): a
// Batch's Next may lie beyond its last record, and the skipped offsets count
// as processed.
type Offset uint64

// Record is one record read from a source partition.
type Record struct {
	Offset Offset
	// WriteTimestamp is when the record was written to the source; it
	// becomes the message's SystemTimestamp and must be non-zero.
	WriteTimestamp store.Timestamp
	// EventTimestamp, if non-zero, is the event time; otherwise the write
	// time is used.
	EventTimestamp time.Time
	Row            weir.Row
	Size           int
}

// Batch is the result of one read.
type Batch struct {
	Records []Record
	// Next is the offset to read from next time.
	Next Offset
	// End reports that the partition has no more records now; for a finite
	// source it means the partition is fully read.
	End bool
}

// SourcePartition reads one partition of an ordered source.
type SourcePartition interface {
	// Key identifies the partition within the source, e.g. "events/3". It is
	// stable across runs: the partition's persisted state is keyed by it.
	Key() string
	// Read returns records starting at from, at most maxRows and (beyond the
	// first) maxBytes. It must not block for long when nothing is available.
	Read(ctx context.Context, from Offset, maxRows, maxBytes int) (Batch, error)
	// ReportCommitted tells the source that every offset below next is
	// committed by the pipeline (e.g. to advance a consumer for lag tools).
	// It runs after the epoch commit and is advisory: the pipeline's own
	// offset lives in its partition state.
	ReportCommitted(ctx context.Context, next Offset) error
	// Finite reports whether End means the partition will never grow.
	Finite() bool
	// Close releases the partition.
	Close() error
}

// CursorPartition is a source partition whose read position is more than
// an offset: a service log's (cycle, last key read). Its cursor commits
// with the position, in the epoch transaction (the job writes it into the
// partition's state whenever the position moves), and a job that opens the
// partition later gets it back before its first Read. Only a Transform
// computation may read such a partition (the source implements
// TransformOnly): a Swift reader's replay must rebuild the same message ids
// from the same offsets, which a cursor over changing rows cannot promise.
type CursorPartition interface {
	SourcePartition
	// Resume positions the partition at its committed offset and cursor
	// (nil: none committed yet) before the first Read.
	Resume(at Offset, cursor []byte) error
	// Cursor returns the cursor at next, the Next of the last batch Read
	// returned (the position the epoch commits).
	Cursor(next Offset) ([]byte, error)
}

// TxnReporter is implemented by source partitions whose record of the
// committed position (a queue consumer's offset, for lag tools) lives in
// the pipeline's own store: the job adds the record's write to the epoch
// transaction that commits the position, so the record is exact (it moves
// with the commit, never ahead of it and never behind it) and costs no
// commit of its own. The job then does not call ReportCommitted.
type TxnReporter interface {
	// ReportInTxn adds to txn the record that every offset below next is
	// committed. It runs on the job's goroutine while the epoch is built.
	ReportInTxn(txn *store.Txn, next Offset)
}

// ReadNotifier is implemented by source partitions that can tell when a
// Read may find records: a job whose last read found the partition's end
// waits on Readable instead of reading again every empty_batch_backoff, so
// a record written to an idle source is read at once and an idle source
// costs no reads.
type ReadNotifier interface {
	// Readable returns a channel closed once a Read from offset from may
	// return a record (already closed if it may now), or nil if the
	// partition cannot tell; the job then polls. Readable must not block.
	// A close that finds nothing is harmless: the job reads and waits again.
	Readable(from Offset) <-chan struct{}
}

// TransformOnly is implemented by sources that only a Transform
// computation may read; the reason says why (a plan with a Swift reader is
// refused with it).
type TransformOnly interface {
	TransformOnly() (reason string)
}

// Source is an ordered, partitioned source.
type Source interface {
	// Partitions lists the partition keys, in a stable order.
	Partitions(ctx context.Context) ([]string, error)
	// Open opens one partition.
	Open(ctx context.Context, key string) (SourcePartition, error)
	Close() error
}

// SinkContext is what a sink instance gets at Init.
type SinkContext struct {
	// Store is the pipeline's store.
	Store store.Store
	// PartitionID names the job's partition; sink state is per partition.
	PartitionID string
	// SinkID is the sink's name in the spec.
	SinkID string
	// LoadState reads the sink's persisted state for this partition (nil if
	// none); SaveState adds a write of it to an epoch transaction.
	LoadState func(ctx context.Context) ([]byte, error)
	SaveState func(txn *store.Txn, state []byte)
	// Logf logs a line attributed to the sink. Never pass secrets.
	Logf func(format string, args ...any)
	// Dropped counts n outputs the sink gave up (at-most-once) in its
	// computation's status; nil: not counted. Sinks call ReportDropped,
	// which logs too. It may be called from any goroutine, also after Close.
	Dropped func(n int)
}

// Sink is one instance of a sink for one job (partition).
//
// The engine calls, on the job's goroutine: Init once; then per epoch
// Distribute for each new output of the sink's input stream (in id order),
// Sync with the epoch transaction, and, if the commit succeeded, Commit.
// done of Distribute may be called from any goroutine, at most once; a
// message counts as delivered (and leaves the outbox) only after done(nil).
type Sink interface {
	Init(ctx context.Context, sc SinkContext) error
	Distribute(msg *weir.Message, done func(error))
	Sync(ctx context.Context, txn *store.Txn) error
	Commit(ctx context.Context)
	// Close stops the instance, waiting for in-flight work as the sink
	// defines (an at-most-once sink waits up to suspend_destruction_duration
	// and reports what it abandons: see Queueing).
	Close() error
}

// PendingSyncer is implemented by sinks that may have state to record in
// an epoch without new outputs (an async sink whose writes completed): the
// engine commits an epoch when PendingSync is true.
type PendingSyncer interface {
	PendingSync() bool
}

// Progress is what a job tells its sinks at the start of every epoch, as
// Flow's UpdateWatermarkState does: how far its computation has come.
type Progress struct {
	// SystemWatermark: every input of the computation with a
	// SystemTimestamp below it is processed (a source computation: every
	// record it read so far is).
	SystemWatermark store.Timestamp
	// EventWatermark is the computation's input event-time watermark.
	EventWatermark time.Time
	// Draining: the pipeline is draining (stopping): sources read nothing
	// new. A sink that holds output back (an open table, a partial batch)
	// should flush it, and report PendingSync until it has.
	Draining bool
	// Final: no input will ever reach the computation again (every
	// upstream completed, or its finite source is read to the end).
	Final bool
	// Backpressure: the computation's outbox is at its limit
	// (output_store_count_limit or output_store_bytes_limit), so it takes
	// no input until outputs are acknowledged. A sink that holds
	// unacknowledged output back (an open table) should flush it: nothing
	// else may release the outbox, and the computation would stall.
	Backpressure bool
}

// InlineDelivery is implemented by sinks that accept every message they are
// given and call its done(nil) before Distribute returns: their write joins
// the epoch transaction (SyncSink), so the output is delivered exactly when
// the epoch commits. The engine keeps no outbox entry for an output whose
// only destinations are such sinks. A type that embeds SyncSink and changes
// Distribute must say false; a sink that says true and does not call done
// within Distribute fails its epoch with an error naming it.
type InlineDelivery interface {
	DeliversInline() bool
}

// ProgressObserver is implemented by sinks that act on their computation's
// progress: closing a time slot once the watermark passed it, flushing on
// a drain. The job calls Progress on its goroutine before each epoch's
// Distribute calls.
type ProgressObserver interface {
	Progress(p Progress)
}

// AtMostOnce is implemented by sinks that deliver each output at most once
// (at_most_once_strategy). After a restart the engine reloads a partition's
// undelivered outputs from its outbox and hands them to every destination
// again; an output still in the outbox may already have been handed to such
// a sink in an earlier life (it stays there until its other destinations
// acknowledge it), so the engine acknowledges reloaded outputs for an
// AtMostOnce sink without handing them over: never twice, at the price of
// losing what the earlier life had queued but not written.
type AtMostOnce interface {
	DeliversAtMostOnce() bool
}

// SinkFactory builds sink instances from the sink's spec parameters.
type SinkFactory func(params SinkParams) (Sink, error)

// SinkParams carries what a factory needs to build one instance.
type SinkParams struct {
	SinkID     string
	Path       string // spec path for error messages
	Parameters map[string]any
	// AtMostOnce is the sink's at_most_once_strategy, nil if absent.
	AtMostOnce *AtMostOnceStrategy
	Store      store.Store
}

// AtMostOnceStrategy mirrors the spec's at_most_once_strategy.
type AtMostOnceStrategy struct {
	Enabled                    bool
	TotalQueueBytesLimit       int64
	SuspendDestructionDuration time.Duration
}

// SourceFactory builds a source from its spec parameters.
type SourceFactory func(params SourceParams) (Source, error)

// SourceParams carries what a factory needs.
type SourceParams struct {
	SourceID   string
	Path       string
	Parameters map[string]any
	Store      store.Store
	// ExternalStates are the pipeline's declared external state tables, by
	// name (a service log cycles over one).
	ExternalStates map[string]*externalstate.Table
}

// SinkWith adapts a connector package's constructor, which takes
// process-level options and returns its concrete sink type, to a
// SinkFactory. A failed constructor yields a nil interface, never a nil
// pointer inside one (which the engine would take for a sink).
func SinkWith[S Sink, O any](newSink func(SinkParams, O) (S, error), o O) SinkFactory {
	return func(sp SinkParams) (Sink, error) {
		s, err := newSink(sp, o)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// SourceWith is SinkWith for sources.
func SourceWith[S Source, O any](newSource func(SourceParams, O) (S, error), o O) SourceFactory {
	return func(sp SourceParams) (Source, error) {
		s, err := newSource(sp, o)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Registry maps connector class names to factories.
type Registry struct {
	mu      sync.RWMutex
	sinks   map[string]SinkFactory
	sources map[string]SourceFactory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{sinks: map[string]SinkFactory{}, sources: map[string]SourceFactory{}}
}

// RegisterSink adds a sink class.
func (r *Registry) RegisterSink(className string, f SinkFactory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sinks[className]; ok {
		return fmt.Errorf("connector: sink class %s already registered", className)
	}
	r.sinks[className] = f
	return nil
}

// RegisterSource adds a source class.
func (r *Registry) RegisterSource(className string, f SourceFactory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sources[className]; ok {
		return fmt.Errorf("connector: source class %s already registered", className)
	}
	r.sources[className] = f
	return nil
}

// Sink returns the sink factory of a class.
func (r *Registry) Sink(className string) (SinkFactory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.sinks[className]
	return f, ok
}

// Source returns the source factory of a class.
func (r *Registry) Source(className string) (SourceFactory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.sources[className]
	return f, ok
}

// SinkClasses lists registered sink classes, sorted.
func (r *Registry) SinkClasses() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.sinks)
}

// SourceClasses lists registered source classes, sorted.
func (r *Registry) SourceClasses() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.sources)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
