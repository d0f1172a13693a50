package spec

import (
	"time"
)

// Defaults applied by SetDefaults (and therefore by Parse to every value the
// file leaves out). Flow's own defaults are noted where weir differs: weir runs
// on one machine by default, so its controller cycles are sub-second and its
// leases last seconds, where Flow's cluster defaults are seconds to minutes.
const (
	DefaultPartitionCount           = 4
	DefaultMaxRowsPerBatch          = 1000
	DefaultMaxBytesPerBatch         = 10 << 20 // 10 MiB
	DefaultBatchDuration            = Duration(0)
	DefaultEmptyBatchBackoff        = Duration(250 * time.Millisecond)
	DefaultOutputStoreCountLimit    = 100_000
	DefaultOutputStoreByteSizeLimit = 256 << 20 // 256 MiB
	DefaultStateCacheByteSizeLimit  = 16 << 20  // 16 MiB per job
	DefaultTimerStoreCountLimit     = 250_000
	DefaultTimerStoreByteSizeLimit  = 100 << 20 // 100 MiB per job

	DefaultTotalQueueBytesLimit       = 100 << 20 // 100 MiB
	DefaultSuspendDestructionDuration = Duration(10 * time.Second)

	DefaultOutOfOrdernessBound = Duration(time.Minute)

	DefaultSchedulerPeriod  = Duration(200 * time.Millisecond)
	DefaultLeaseTimeout     = Duration(5 * time.Second)
	DefaultLeasePingPeriod  = Duration(time.Second)
	DefaultLeaseCheckPeriod = Duration(2 * time.Second)
	DefaultLostJobTimeout   = Duration(3 * time.Second)
	DefaultWorkerCount      = 2

	DefaultJobRestartBackoff     = Duration(time.Second)
	DefaultJobRestartBackoffMax  = Duration(30 * time.Second)
	DefaultRescaleQuiesceTimeout = Duration(10 * time.Second)
)

// Limits Validate enforces on the numbers that size memory, so that one
// mistyped number (partition_count = 1000000000) is an error at load rather
// than a process that grows until the machine runs out of memory.
const (
	// MaxPartitionCount bounds partition_count: each partition is a job
	// with its own mailbox, outbox and state cache.
	MaxPartitionCount = 4096
	// MaxRowsPerBatch bounds max_rows_per_batch: an epoch holds its batch
	// in memory.
	MaxRowsPerBatch = 1_000_000
	// MaxBytesPerBatch bounds max_bytes_per_batch (1 GiB).
	MaxBytesPerBatch = 1 << 30
	// MaxWorkerCount bounds dynamic_spec.worker_count.
	MaxWorkerCount = 256
)

// Pipeline is a whole pipeline spec: computations joined by streams, plus the
// dynamic part (target state and controller tunables).
//
// A Pipeline comes from Parse/ParseYSON/ParseYAML (defaults applied) or is built
// in code (call SetDefaults). Either way call Validate before running it: the
// decoders check shapes and types only, Validate checks meaning.
type Pipeline struct {
	// Computations by id. Ids are made of [A-Za-z0-9_].
	Computations map[string]*Computation `yson:"computations,omitempty" yaml:"computations,omitempty"`
	// Streams are the internal streams between computations, by id. Every stream
	// has exactly one writer computation (listed in its output_stream_ids).
	// Ids are made of [A-Za-z0-9_] because they are embedded in message ids.
	Streams map[string]*Stream `yson:"streams,omitempty" yaml:"streams,omitempty"`
	// ExternalStates declares the pipeline's external state tables, by table
	// name (Flow's external state, IExternalStateManager): user tables in the
	// pipeline's store that computations read and write by key, their writes
	// committed in the epoch transaction (package externalstate). A
	// computation writes only the tables its external_state_managers lists
	// and reads those and its external_state_joiners. Names are made of
	// [A-Za-z0-9_].
	ExternalStates map[string]*ExternalState `yson:"external_states,omitempty" yaml:"external_states,omitempty"`
	// Dynamic holds what Flow keeps in the separate dynamic spec: the target
	// state and controller tunables. Optional; every field has a default.
	Dynamic DynamicSpec `yson:"dynamic_spec" yaml:"dynamic_spec"`
}

// Stream is an internal stream. Its schema is optional; when given, Validate
// checks the key columns of the computations reading the stream against it.
type Stream struct {
	// Schema lists the payload columns, in order.
	Schema []Column `yson:"schema,omitempty" yaml:"schema,omitempty"`
}

// Column is one named, typed column of a schema or key.
type Column struct {
	// Name is the column name; non-empty and unique within its schema.
	Name string `yson:"name" yaml:"name"`
	// Type is a YT primitive type name such as uint64, int64, string, double,
	// boolean or any; see ColumnType.
	Type ColumnType `yson:"type" yaml:"type"`
}

// ColumnType is a YT primitive column type name.
type ColumnType string

// Column types. The key's first column must be uint64 (the key hash) unless the
// computation sets experimental_enable_non_uint_key. Validate also accepts the
// other YT primitive types: int8, int16, int32, uint8, uint16, uint32, float,
// utf8, null, void, date, datetime, timestamp, interval, json, uuid, yson.
const (
	TypeUint64  ColumnType = "uint64"
	TypeInt64   ColumnType = "int64"
	TypeString  ColumnType = "string"
	TypeDouble  ColumnType = "double"
	TypeBoolean ColumnType = "boolean"
	TypeAny     ColumnType = "any"
)

// columnTypes is every ColumnType Validate accepts.
var columnTypes = []string{
	"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
	"float", "double", "boolean", "string", "utf8", "any", "yson", "null", "void",
	"date", "datetime", "timestamp", "interval", "json", "uuid",
}

// ProcessingMode selects the input deduplication of a Transform-family
// computation (seed: "Mode processing_mode").
type ProcessingMode string

const (
	// ExactlyOnce deduplicates inputs by message id (the default).
	ExactlyOnce ProcessingMode = "exactly_once"
	// AtLeastOnceConsistent disables input deduplication by message id: a
	// message may be processed again after a job restart, while state, epoch
	// commits and leases keep working (so state stays consistent).
	AtLeastOnceConsistent ProcessingMode = "at_least_once_consistent"
)

// Computation is one computation of the pipeline: user code (named by
// ComputationClassName and registered in code, which also fixes its Kind) plus
// its wiring, sources, sinks, timers and tunables.
//
// Engine keys that Flow reads from parameters (processing_mode,
// allow_batching_with_relaxed_guarantees) are accepted there and directly under
// the computation; the decoders lift them into the typed fields and remove them
// from Parameters, so that a class decoding its own Parameters strictly (with
// DecodeParameters) does not see them.
type Computation struct {
	// ComputationClassName names the code that runs the computation, as
	// registered in code. Required.
	ComputationClassName string `yson:"computation_class_name,required" yaml:"computation_class_name"`

	// GroupBy lists the key column names. The key's first column is a uint64
	// hash that partitions the computation, unless ExperimentalEnableNonUintKey.
	// When GroupBySchema is also given, GroupBy must list its names in order.
	GroupBy []string `yson:"group_by,omitempty" yaml:"group_by,omitempty"`
	// GroupBySchema lists the key columns with their types (Flow's
	// group_by_schema). The first column must be uint64 unless
	// ExperimentalEnableNonUintKey.
	GroupBySchema []Column `yson:"group_by_schema,omitempty" yaml:"group_by_schema,omitempty"`
	// ExperimentalEnableNonUintKey allows a key whose first column is not a
	// uint64 hash. Default false. It also turns off the compact dedup table by
	// default (see CompactDedup), because compact dedup keys need the hash.
	ExperimentalEnableNonUintKey bool `yson:"experimental_enable_non_uint_key,omitempty" yaml:"experimental_enable_non_uint_key,omitempty"`
	// UseCompactInputMessages forces the compact dedup table on (true) or off
	// (false); nil means automatic: compact unless ExperimentalEnableNonUintKey.
	// true together with ExperimentalEnableNonUintKey is rejected by Validate.
	UseCompactInputMessages *bool `yson:"use_compact_input_messages,omitempty" yaml:"use_compact_input_messages,omitempty"`

	// InputStreamIDs are the internal streams (ids in Pipeline.Streams) the
	// computation reads. Source streams are not listed here.
	InputStreamIDs []string `yson:"input_stream_ids,omitempty" yaml:"input_stream_ids,omitempty"`
	// OutputStreamIDs are the internal streams (ids in Pipeline.Streams) the
	// computation writes. Each stream has exactly one writer.
	OutputStreamIDs []string `yson:"output_stream_ids,omitempty" yaml:"output_stream_ids,omitempty"`

	// Parameters are the class's own parameters, kept raw because each class
	// defines its own; decode them with DecodeParameters. Values are normalized
	// to map[string]any, []any, string, int64, uint64, float64, bool and nil.
	Parameters map[string]any `yson:"parameters,omitempty" yaml:"parameters,omitempty"`

	// ProcessingMode is exactly_once (default) or at_least_once_consistent.
	// Only Transform-family computations (Transform, TransformOrderedSource)
	// may relax it. Accepted directly under the computation (as the seed writes
	// it) and in parameters (where Flow reads it); both given and different is
	// a decoding error.
	ProcessingMode ProcessingMode `yson:"processing_mode,omitempty" yaml:"processing_mode,omitempty"`
	// AllowBatchingWithRelaxedGuarantees lets a SwiftMap output combine several
	// input messages (downstream then sees at-least-once, and loses per-key
	// MessageId order). Default false. Read from
	// parameters.allow_batching_with_relaxed_guarantees as in Flow, also
	// accepted directly; both given and different is a decoding error.
	AllowBatchingWithRelaxedGuarantees bool `yson:"allow_batching_with_relaxed_guarantees,omitempty" yaml:"allow_batching_with_relaxed_guarantees,omitempty"`

	// DeadLetterStream names one of output_stream_ids. When set, an input
	// message whose processing fails — user code returns an error or
	// panics, or emits a row that cannot be stored or routed — does not
	// stop the partition: its call leaves no trace (outputs, timers, state
	// and external state writes of that call are undone), and one row
	// {message_id, stream, computation, partition, error, payload, and for
	// a source row source, source_partition and offset} goes to this
	// stream instead, committed with the epoch like any output (exactly
	// once). A per-batch (OnMessages) call dead-letters every message of
	// the key batch; a failing timer still fails the partition. Unset (the
	// default): a failure fails the partition, which restarts with backoff
	// until the message is fixed or skipped ('weir pipeline skip').
	DeadLetterStream string `yson:"dead_letter_stream,omitempty" yaml:"dead_letter_stream,omitempty"`

	// SourceStreams are the external sources of a source computation, by
	// source stream id (exactly one for the ordered-source kinds).
	SourceStreams map[string]*Source `yson:"source_streams,omitempty" yaml:"source_streams,omitempty"`
	// Sinks deliver some of the computation's output streams to external
	// systems, by sink id.
	Sinks map[string]*Sink `yson:"sinks,omitempty" yaml:"sinks,omitempty"`
	// TimerStreams are the computation's timer streams, by timer stream id.
	TimerStreams map[string]*TimerStream `yson:"timer_streams,omitempty" yaml:"timer_streams,omitempty"`
	// WatermarkStrategy configures event-time watermarks of a source
	// computation's source streams. nil = no event watermarks.
	WatermarkStrategy *WatermarkStrategy `yson:"watermark_strategy,omitempty" yaml:"watermark_strategy,omitempty"`

	// PartitionCount is the number of key-hash partitions of a computation
	// that reads internal streams (a weir extension: Flow sizes partitions
	// from load; weir, on one machine, uses a fixed count). Source
	// computations ignore it: they have one partition per source partition.
	// Default 4; 1 to MaxPartitionCount (4096).
	PartitionCount int `yson:"partition_count,omitempty" yaml:"partition_count,omitempty"`

	// The knobs below are per-computation tunables that Flow keeps in the
	// dynamic computation spec; weir reads them from here.

	// MaxRowsPerBatch caps the rows fetched per epoch from each input, from the
	// timers and from each source. Default 1000 (as in Flow); 1 to
	// MaxRowsPerBatch (1,000,000).
	MaxRowsPerBatch int `yson:"max_rows_per_batch,omitempty" yaml:"max_rows_per_batch,omitempty"`
	// MaxBytesPerBatch caps the bytes fetched per epoch, per input, timers and
	// each source. Default 10 MiB (as in Flow); 1 to MaxBytesPerBatch (1 GiB).
	MaxBytesPerBatch int64 `yson:"max_bytes_per_batch,omitempty" yaml:"max_bytes_per_batch,omitempty"`
	// BatchDuration is how long a job may wait for its batch to fill before
	// processing what it has: after an epoch whose input batch was not full
	// (fewer than max_rows_per_batch rows), the next epoch waits until
	// max_rows_per_batch rows are available or BatchDuration has passed.
	// Larger batches amortise each commit's fsync over more messages, at the
	// cost of up to BatchDuration of latency when input is sparse. Default 0:
	// process what is there at once (Flow's default is 1s, sized for a
	// cluster where a commit costs milliseconds; one machine commits in about
	// 0.1 ms). Must not be negative.
	BatchDuration Duration `yson:"batch_duration,omitempty" yaml:"batch_duration,omitempty"`
	// LeaseCheckPeriod is how often a job with nothing to commit still commits
	// an empty, lease-guarded transaction (±20%) so that a job whose lease was
	// lost finds out even when idle. Zero means "use
	// dynamic_spec.lease_check_period" (weir default 2s); Flow's default is 1m,
	// which suits leases of minutes, not weir's leases of seconds. SetDefaults
	// (and therefore Parse) fills it in from the dynamic spec.
	LeaseCheckPeriod Duration `yson:"lease_check_period,omitempty" yaml:"lease_check_period,omitempty"`
	// OutputStoreCountLimit is the number of undelivered outputs the outbox may
	// hold before the computation stops taking input (backpressure); for a
	// Swift computation, the inputs held until their outputs are delivered.
	// Default 100,000 (Flow: 1G, sized for a cluster); must be positive.
	OutputStoreCountLimit int64 `yson:"output_store_count_limit,omitempty" yaml:"output_store_count_limit,omitempty"`
	// OutputStoreByteSizeLimit is the byte size of undelivered outputs the
	// outbox (or a Swift computation's held inputs) may reach before the
	// computation stops taking input. Default 256 MiB (Flow: 100 GiB, sized
	// for a cluster); must be positive.
	OutputStoreByteSizeLimit int64 `yson:"output_store_byte_size_limit,omitempty" yaml:"output_store_byte_size_limit,omitempty"`
	// StateCacheByteSizeLimit bounds the memory each job of the computation
	// spends caching decoded per-key states between epochs (estimated from
	// the encoded sizes). Beyond it the least recently used states are
	// dropped from memory after a commit and read again from the store when
	// next used. Default 16 MiB per job (Flow shares one state cache per
	// worker: /dynamic_spec/job_tracker/state_cache); must be positive.
	StateCacheByteSizeLimit int64 `yson:"state_cache_byte_size_limit,omitempty" yaml:"state_cache_byte_size_limit,omitempty"`
	// TimerStoreCountLimit and TimerStoreByteSizeLimit bound the active timers
	// of one partition (all of them are held in memory): a job that would
	// hold more fails with an error naming the limit ("too many timers"), as
	// Flow's does. Defaults 250,000 timers and 100 MiB (as in Flow); must be
	// positive.
	TimerStoreCountLimit    int64 `yson:"timer_store_count_limit,omitempty" yaml:"timer_store_count_limit,omitempty"`
	TimerStoreByteSizeLimit int64 `yson:"timer_store_byte_size_limit,omitempty" yaml:"timer_store_byte_size_limit,omitempty"`
	// EmptyBatchBackoff is the pause after an epoch found no input, or was
	// blocked by backpressure, before the next fetch. Default 250ms (as in
	// Flow); must be positive so that an idle job does not spin. Input ends
	// the pause early: a message on an internal stream, or a write to a
	// QueueSource's queue on the embedded store (the source says it grew).
	EmptyBatchBackoff Duration `yson:"empty_batch_backoff,omitempty" yaml:"empty_batch_backoff,omitempty"`

	// ExternalStateManagers lists the external state tables (names in
	// external_states) the computation writes, and may read: its writes are
	// buffered during the epoch and committed in the epoch transaction, so a
	// replay never applies them twice. A write to a table not listed here
	// fails the call; a class that declares the tables it writes
	// (weir.Computation.ExternalStateWrites) is refused at load unless each
	// is listed. Not allowed for SwiftMap and SwiftOrderedSource
	// computations (their inputs are deduplicated by watermark only, so a
	// redelivered input would apply a write twice).
	ExternalStateManagers []string `yson:"external_state_managers,omitempty" yaml:"external_state_managers,omitempty"`
	// ExternalStateJoiners lists external state tables the computation only
	// reads (Flow's external_state_joiners). A SwiftMap may read them, but
	// its code must stay deterministic: read only rows that do not change
	// while its inputs may be replayed.
	ExternalStateJoiners []string `yson:"external_state_joiners,omitempty" yaml:"external_state_joiners,omitempty"`
}

// ExternalState declares one external state table: a sorted table of rows
// in the pipeline's store, keyed by KeyColumns (in order: rows sort by the
// first key column, then the second, ...).
type ExternalState struct {
	// KeyColumns are the key columns, in sort order; at least one. Every
	// row holds them, with scalar values of the declared types (not null).
	// A ServiceLogSource cycling over the table needs the first to be a
	// uint64, uniformly distributed (a hash): it partitions by it.
	KeyColumns []Column `yson:"key_columns,omitempty" yaml:"key_columns,omitempty"`
	// ValueColumns, if given, are the only other columns a row may have,
	// each of the declared type or null. Empty: free-form rows (any other
	// columns).
	ValueColumns []Column `yson:"value_columns,omitempty" yaml:"value_columns,omitempty"`
}

// Source is one external source stream of a source computation.
type Source struct {
	// SourceClassName names the source implementation, as registered in code.
	// Required.
	SourceClassName string `yson:"source_class_name,required" yaml:"source_class_name"`
	// Parameters are the source class's own parameters; decode them with
	// DecodeParameters.
	Parameters map[string]any `yson:"parameters,omitempty" yaml:"parameters,omitempty"`
}

// Sink delivers some of its computation's output streams to an external system.
//
// at_most_once_strategy is accepted directly under the sink (as the seed writes
// it) and in the sink's parameters (where Flow reads it); the decoders lift it
// into AtMostOnceStrategy and remove it from Parameters. Both given and
// different is a decoding error.
type Sink struct {
	// SinkClassName names the sink implementation, as registered in code.
	// Required.
	SinkClassName string `yson:"sink_class_name,required" yaml:"sink_class_name"`
	// InputStreamIDs are the streams the sink delivers; each must be an output
	// stream of the sink's computation. At least one.
	InputStreamIDs []string `yson:"input_stream_ids,omitempty" yaml:"input_stream_ids,omitempty"`
	// Parameters are the sink class's own parameters; decode them with
	// DecodeParameters.
	Parameters map[string]any `yson:"parameters,omitempty" yaml:"parameters,omitempty"`
	// AtMostOnceStrategy, when present and enabled, relaxes an async sink to
	// at-most-once (seed: "At-most-once semantics"). nil = not configured. A
	// sink class that cannot honour it must reject it when it starts.
	AtMostOnceStrategy *AtMostOnceStrategy `yson:"at_most_once_strategy,omitempty" yaml:"at_most_once_strategy,omitempty"`
}

// AtMostOnceStrategy: messages go to a bounded in-memory queue and are dropped,
// without an error, when it is full. No deduplication, no delivery guarantee.
type AtMostOnceStrategy struct {
	// Enabled turns the strategy on. Default false (as in Flow).
	Enabled bool `yson:"enabled" yaml:"enabled"`
	// TotalQueueBytesLimit is the queue's size in bytes; messages beyond it
	// are dropped. Default 100 MiB; must be positive.
	TotalQueueBytesLimit int64 `yson:"total_queue_bytes_limit" yaml:"total_queue_bytes_limit"`
	// SuspendDestructionDuration is how long a stopping sink waits for
	// in-flight writes. Default 10s (as in Flow); must be positive.
	SuspendDestructionDuration Duration `yson:"suspend_destruction_duration" yaml:"suspend_destruction_duration"`
}

// TimeType says which watermark fires a timer.
type TimeType string

const (
	// EventTime timers fire when the event watermark of the watched streams
	// reaches their trigger timestamp (the default).
	EventTime TimeType = "event_time"
	// SystemTime timers fire by the system watermark of the watched streams.
	SystemTime TimeType = "system_time"
)

// TimerStream is one timer stream of a computation.
type TimerStream struct {
	// TimeType is event_time (default) or system_time.
	TimeType TimeType `yson:"time_type,omitempty" yaml:"time_type,omitempty"`
	// Streams are the watched streams whose watermark (the minimum over them)
	// fires the timers: input or source streams of the computation. Empty
	// means all of them; use Computation.TimerWatchedStreams to resolve it.
	Streams []string `yson:"streams,omitempty" yaml:"streams,omitempty"`
}

// WatermarkStrategy makes a source computation assign event timestamps and
// generate event watermarks for its source streams.
type WatermarkStrategy struct {
	// OutOfOrdernessBound is how far behind the largest event timestamp seen
	// the watermark trails: the watermark is max timestamp minus this bound.
	// Default 1m (as in Flow); must not be negative.
	OutOfOrdernessBound Duration `yson:"out_of_orderness_bound,omitempty" yaml:"out_of_orderness_bound,omitempty"`
	// EventTimestampColumn names the payload column holding the event
	// timestamp. Empty = the source's own event timestamp.
	EventTimestampColumn string `yson:"event_timestamp_column,omitempty" yaml:"event_timestamp_column,omitempty"`
	// IdlePartitionTimeout excludes a source partition from the watermark
	// after it has had no data for this long, so that one idle partition does
	// not hold the watermark back. Zero (default) disables it; must not be
	// negative.
	IdlePartitionTimeout Duration `yson:"idle_partition_timeout,omitempty" yaml:"idle_partition_timeout,omitempty"`
}

// TargetState is the pipeline state the controller drives towards.
type TargetState string

const (
	// StateWorking runs the pipeline (the default).
	StateWorking TargetState = "working"
	// StateStopped drains the pipeline: sources stop, everything already
	// read is processed and committed, then all jobs stop.
	StateStopped TargetState = "stopped"
	// StatePaused stops all jobs at once; intermediate data may remain.
	StatePaused TargetState = "paused"
	// StateCompleted is the final state of a pipeline whose finite sources
	// are all processed.
	StateCompleted TargetState = "completed"
)

// DynamicSpec is the part of the spec that may change while the pipeline runs:
// the target state and the controller's tunables. weir's defaults suit one
// machine — sub-second scheduling cycles and leases of a few seconds — while
// Flow's cluster defaults are seconds to minutes (scheduler_period 5s,
// lost_job_timeout 10s, lease_check_period 1m).
type DynamicSpec struct {
	// TargetState is working (default), stopped, paused or completed.
	TargetState TargetState `yson:"target_state,omitempty" yaml:"target_state,omitempty"`
	// SchedulerPeriod is the controller's cycle: check leases, remove failed
	// and lost jobs, lay out partitions, create leases. Default 200ms (Flow:
	// 5s); must be positive.
	SchedulerPeriod Duration `yson:"scheduler_period,omitempty" yaml:"scheduler_period,omitempty"`
	// LeaseTimeout is how long a lease lives without a ping before it
	// expires (and fences its job's commits). Default 5s; must be greater
	// than LeasePingPeriod.
	LeaseTimeout Duration `yson:"lease_timeout,omitempty" yaml:"lease_timeout,omitempty"`
	// LeasePingPeriod is how often the controller pings each live lease.
	// Default 1s; must be positive and shorter than LeaseTimeout, or healthy
	// leases would expire between pings.
	LeasePingPeriod Duration `yson:"lease_ping_period,omitempty" yaml:"lease_ping_period,omitempty"`
	// LeaseCheckPeriod is the pipeline-wide default for
	// Computation.LeaseCheckPeriod (the idle job's lease probe). Default 2s
	// (Flow: 1m per computation); must be positive.
	LeaseCheckPeriod Duration `yson:"lease_check_period,omitempty" yaml:"lease_check_period,omitempty"`
	// LostJobTimeout is how long a job may go without a status before the
	// controller considers it lost and replaces it. Default 3s (Flow: 10s);
	// must be positive.
	LostJobTimeout Duration `yson:"lost_job_timeout,omitempty" yaml:"lost_job_timeout,omitempty"`
	// WorkerCount is the number of workers an embedded (one-process) run
	// starts. Default 2; 1 to MaxWorkerCount (256).
	WorkerCount int `yson:"worker_count,omitempty" yaml:"worker_count,omitempty"`
	// JobRestartBackoff is how long the controller waits before restarting
	// a partition whose job failed (an error, a sink whose retries ran out,
	// a job stuck without status); it doubles with each consecutive failure
	// of the partition up to JobRestartBackoffMax. A job that then runs for
	// JobRestartBackoffMax without failing resets the count. Lost workers and
	// expired leases are not the partition's fault and restart at once.
	// Default 1s; must be positive.
	JobRestartBackoff Duration `yson:"job_restart_backoff,omitempty" yaml:"job_restart_backoff,omitempty"`
	// JobRestartBackoffMax caps JobRestartBackoff's doubling. Default 30s;
	// must not be shorter than JobRestartBackoff.
	JobRestartBackoffMax Duration `yson:"job_restart_backoff_max,omitempty" yaml:"job_restart_backoff_max,omitempty"`
	// RescaleQuiesceTimeout bounds how long a rescale ('weir pipeline
	// rescale', or a new partition_count of a keyed Transform) keeps the
	// computation quiesced — taking no input — while its outputs are
	// delivered: past it the computation takes input again and the rescale
	// is tried again after a backoff (doubling from this, at most 5m).
	// Default 10s; must be positive.
	RescaleQuiesceTimeout Duration `yson:"rescale_quiesce_timeout,omitempty" yaml:"rescale_quiesce_timeout,omitempty"`
}

// Defaulter is implemented by types that fill their zero-valued fields with
// defaults. The decoders (Parse*, DecodeParameters) call SetDefaults on every
// struct they allocate before decoding keys into it, so a key left out keeps
// its default while an explicit value — even zero — is kept as written (and
// rejected by validation where zero is invalid).
//
// Invariant: SetDefaults changes only zero-valued fields, so calling it again,
// or on a value built in code, never overrides a value that was set.
type Defaulter interface {
	SetDefaults()
}

// SetDefaults fills the zero-valued fields of p and of everything it contains,
// including each computation's LeaseCheckPeriod from Dynamic.LeaseCheckPeriod.
// Call it on a Pipeline built in code before Validate; Parse has done it.
func (p *Pipeline) SetDefaults() {
	p.Dynamic.SetDefaults()
	for _, c := range p.Computations {
		if c != nil {
			c.SetDefaults()
		}
	}
	p.inheritDynamic()
}

// inheritDynamic fills each computation's unset LeaseCheckPeriod from the
// dynamic spec.
func (p *Pipeline) inheritDynamic() {
	for _, c := range p.Computations {
		if c != nil && c.LeaseCheckPeriod == 0 {
			c.LeaseCheckPeriod = p.Dynamic.LeaseCheckPeriod
		}
	}
}

// SetDefaults fills the zero-valued fields of c and of its sinks and timers.
// LeaseCheckPeriod stays zero: it is inherited from the pipeline's dynamic spec
// by Pipeline.SetDefaults.
func (c *Computation) SetDefaults() {
	if c.ProcessingMode == "" {
		c.ProcessingMode = ExactlyOnce
	}
	if c.PartitionCount == 0 {
		c.PartitionCount = DefaultPartitionCount
	}
	if c.MaxRowsPerBatch == 0 {
		c.MaxRowsPerBatch = DefaultMaxRowsPerBatch
	}
	if c.MaxBytesPerBatch == 0 {
		c.MaxBytesPerBatch = DefaultMaxBytesPerBatch
	}
	if c.OutputStoreCountLimit == 0 {
		c.OutputStoreCountLimit = DefaultOutputStoreCountLimit
	}
	if c.OutputStoreByteSizeLimit == 0 {
		c.OutputStoreByteSizeLimit = DefaultOutputStoreByteSizeLimit
	}
	if c.EmptyBatchBackoff == 0 {
		c.EmptyBatchBackoff = DefaultEmptyBatchBackoff
	}
	if c.StateCacheByteSizeLimit == 0 {
		c.StateCacheByteSizeLimit = DefaultStateCacheByteSizeLimit
	}
	if c.TimerStoreCountLimit == 0 {
		c.TimerStoreCountLimit = DefaultTimerStoreCountLimit
	}
	if c.TimerStoreByteSizeLimit == 0 {
		c.TimerStoreByteSizeLimit = DefaultTimerStoreByteSizeLimit
	}
	for _, s := range c.Sinks {
		if s != nil && s.AtMostOnceStrategy != nil {
			s.AtMostOnceStrategy.SetDefaults()
		}
	}
	for _, t := range c.TimerStreams {
		if t != nil {
			t.SetDefaults()
		}
	}
	if c.WatermarkStrategy != nil {
		c.WatermarkStrategy.SetDefaults()
	}
}

// SetDefaults fills the zero-valued limits of s.
func (s *AtMostOnceStrategy) SetDefaults() {
	if s.TotalQueueBytesLimit == 0 {
		s.TotalQueueBytesLimit = DefaultTotalQueueBytesLimit
	}
	if s.SuspendDestructionDuration == 0 {
		s.SuspendDestructionDuration = DefaultSuspendDestructionDuration
	}
}

// SetDefaults sets TimeType to event_time when it is empty.
func (t *TimerStream) SetDefaults() {
	if t.TimeType == "" {
		t.TimeType = EventTime
	}
}

// SetDefaults sets OutOfOrdernessBound to 1m when it is zero.
func (w *WatermarkStrategy) SetDefaults() {
	if w.OutOfOrdernessBound == 0 {
		w.OutOfOrdernessBound = DefaultOutOfOrdernessBound
	}
}

// SetDefaults fills the zero-valued fields of d with weir's one-machine
// defaults.
func (d *DynamicSpec) SetDefaults() {
	if d.TargetState == "" {
		d.TargetState = StateWorking
	}
	if d.SchedulerPeriod == 0 {
		d.SchedulerPeriod = DefaultSchedulerPeriod
	}
	if d.LeaseTimeout == 0 {
		d.LeaseTimeout = DefaultLeaseTimeout
	}
	if d.LeasePingPeriod == 0 {
		d.LeasePingPeriod = DefaultLeasePingPeriod
	}
	if d.LeaseCheckPeriod == 0 {
		d.LeaseCheckPeriod = DefaultLeaseCheckPeriod
	}
	if d.LostJobTimeout == 0 {
		d.LostJobTimeout = DefaultLostJobTimeout
	}
	if d.WorkerCount == 0 {
		d.WorkerCount = DefaultWorkerCount
	}
	if d.JobRestartBackoff == 0 {
		d.JobRestartBackoff = DefaultJobRestartBackoff
	}
	if d.JobRestartBackoffMax == 0 {
		d.JobRestartBackoffMax = DefaultJobRestartBackoffMax
	}
	if d.RescaleQuiesceTimeout == 0 {
		d.RescaleQuiesceTimeout = DefaultRescaleQuiesceTimeout
	}
}

// CompactDedup reports whether the computation deduplicates its inputs with the
// compact table (compact_input_messages) rather than input_messages: the value
// of use_compact_input_messages when set, else !experimental_enable_non_uint_key
// (the seed's rule: compact dedup keys are built from the uint64 key hash).
func (c *Computation) CompactDedup() bool {
	if c.UseCompactInputMessages != nil {
		return *c.UseCompactInputMessages
	}
	return !c.ExperimentalEnableNonUintKey
}

// KeyColumns returns the key column names: GroupBy when given, else the names
// of GroupBySchema. nil means the computation has no key.
func (c *Computation) KeyColumns() []string {
	if len(c.GroupBy) > 0 {
		return c.GroupBy
	}
	if len(c.GroupBySchema) == 0 {
		return nil
	}
	names := make([]string, len(c.GroupBySchema))
	for i, col := range c.GroupBySchema {
		names[i] = col.Name
	}
	return names
}

// TimerWatchedStreams returns the streams whose watermark fires the timers of
// timer stream id: its Streams when given, else every input stream and source
// stream of c (Flow's default dependency), inputs first, sources in id order.
// It returns nil when c has no such timer stream.
func (c *Computation) TimerWatchedStreams(id string) []string {
	t, ok := c.TimerStreams[id]
	if !ok || t == nil {
		return nil
	}
	if len(t.Streams) > 0 {
		return t.Streams
	}
	out := append([]string(nil), c.InputStreamIDs...)
	return append(out, sortedKeys(c.SourceStreams)...)
}
