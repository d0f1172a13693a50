// Package plan holds a pipeline ready to run: every computation with its
// code, connectors and tunables resolved (the engine builds it from a spec;
// tests build it directly), how computations split into partitions, and
// the ids of partitions and jobs. The controller, the workers and the jobs
// all read it; it depends on none of them.
package plan

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// ProcessingMode is a Transform computation's processing_mode.
type ProcessingMode int

const (
	// ExactlyOnce (default): inputs are deduplicated by message id.
	ExactlyOnce ProcessingMode = iota
	// AtLeastOnceConsistent: no dedup reads or writes; state, leases and epoch
	// atomicity are unchanged, so state stays consistent, but inputs re-sent
	// after a restart are processed again.
	AtLeastOnceConsistent
)

func (m ProcessingMode) String() string {
	if m == AtLeastOnceConsistent {
		return "at_least_once_consistent"
	}
	return "exactly_once"
}

// Plan is a pipeline ready to run: every computation with its code,
// connectors and tunables resolved. The engine builds it from a spec; tests
// build it directly.
type Plan struct {
	Computations map[string]*CompPlan
}

// CompPlan is one computation of a Plan.
type CompPlan struct {
	Name string
	Code weir.Computation

	// Source, when set, makes this an ordered-source computation reading
	// SourceStream from it (TransformOrderedSource or SwiftOrderedSource).
	Source       connector.Source
	SourceStream string

	// GroupBy are the key columns for input messages. If the first column
	// holds a uint64 it is the key hash itself (Flow's farm_hash column);
	// otherwise the hash is computed from the encoded key.
	GroupBy []string
	// Partitions is the number of key-hash partitions (ignored for source
	// computations, which have one partition per source partition).
	Partitions int

	Mode          ProcessingMode
	CompactDedup  bool
	AllowBatching bool

	Inputs  []string
	Outputs []string
	// DeadLetterStream, if set (one of Outputs), receives the input
	// messages whose processing fails, instead of failing the partition
	// (spec: dead_letter_stream).
	DeadLetterStream string
	Sinks            []SinkPlan
	// Timers maps timer stream names to their time type.
	Timers map[string]TimerPlan

	Watermark WatermarkPlan
	Batch     BatchPlan

	// LeaseCheckPeriod bounds how long a job commits nothing: an idle job
	// commits an empty, lease-fenced transaction at least this often (±20%).
	LeaseCheckPeriod time.Duration
	// OutputStoreCountLimit and OutputStoreBytesLimit stop input while the
	// outbox holds more undelivered outputs than this (backpressure).
	OutputStoreCountLimit int
	OutputStoreBytesLimit int
	// StateCacheBytes bounds the decoded states a job keeps cached between
	// epochs (spec state_cache_byte_size_limit).
	StateCacheBytes int
	// TimerCountLimit and TimerBytesLimit bound one partition's active
	// timers (spec timer_store_count_limit / timer_store_byte_size_limit).
	TimerCountLimit int
	TimerBytesLimit int

	// ExternalStates are the external state tables the computation may
	// use, by name: written (external_state_managers, Write) or only read
	// (external_state_joiners).
	ExternalStates map[string]ExternalAccess
}

// ExternalAccess is a computation's access to one external state table.
type ExternalAccess struct {
	Table *externalstate.Table
	// Write: the computation may write the table (and read it).
	Write bool
}

// SinkPlan is one sink of a computation.
type SinkPlan struct {
	ID          string
	InputStream string
	New         func() (connector.Sink, error)
}

// TimerPlan describes one timer stream.
type TimerPlan struct {
	// SystemTime timers fire by the store clock; otherwise by the event-time
	// watermark.
	SystemTime bool
}

// WatermarkPlan is a source computation's watermark_strategy.
type WatermarkPlan struct {
	OutOfOrdernessBound time.Duration
	// IdleTimeout: a source partition with no new record for this long does
	// not hold the watermark back. Zero disables.
	IdleTimeout time.Duration
	// EventColumn, if set, names the column holding each source row's event
	// time: an integer is unix milliseconds, a float unix seconds, a string
	// RFC 3339. Rows without a usable value keep the source's event time.
	EventColumn string
}

// BatchPlan bounds one epoch's input.
type BatchPlan struct {
	MaxRows  int
	MaxBytes int
	// Duration is how long an epoch may wait to fill a batch.
	Duration time.Duration
	// EmptyBackoff is how long a job waits after an epoch that found nothing.
	EmptyBackoff time.Duration
}

// MaxBatchRows is the largest max_rows_per_batch of the pipeline's
// computations (0 without any): the transport bounds each partition's
// buffer by it (transport.RowLimit).
func (p *Plan) MaxBatchRows() int {
	n := 0
	for _, c := range p.Computations {
		n = max(n, c.Batch.MaxRows)
	}
	return n
}

// Swift reports whether the computation is a SwiftMap (or SwiftOrderedSource).
func (c *CompPlan) Swift() bool { return c.Code.Kind == weir.KindSwiftMap }

// IsSource reports whether the computation reads a source.
func (c *CompPlan) IsSource() bool { return c.Source != nil }

// withDefaults fills zero tunables with the spec's defaults (package spec
// is the one home of every default; plans built in code get the same
// values as plans built from a spec).
func (c *CompPlan) withDefaults() {
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	setDefault(&c.Batch.MaxRows, spec.DefaultMaxRowsPerBatch)
	setDefault(&c.Batch.MaxBytes, spec.DefaultMaxBytesPerBatch)
	setDefault(&c.Batch.EmptyBackoff, spec.DefaultEmptyBatchBackoff.Std())
	setDefault(&c.LeaseCheckPeriod, spec.DefaultLeaseCheckPeriod.Std())
	setDefault(&c.OutputStoreCountLimit, spec.DefaultOutputStoreCountLimit)
	setDefault(&c.OutputStoreBytesLimit, spec.DefaultOutputStoreByteSizeLimit)
	setDefault(&c.StateCacheBytes, spec.DefaultStateCacheByteSizeLimit)
	setDefault(&c.TimerCountLimit, spec.DefaultTimerStoreCountLimit)
	setDefault(&c.TimerBytesLimit, spec.DefaultTimerStoreByteSizeLimit)
}

// setDefault sets *v to def if *v is not positive.
func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Validate checks a plan's internal consistency and fills defaults.
func (p *Plan) Validate() error {
	writers := map[string]string{}
	for name, c := range p.Computations {
		if c.Name == "" {
			c.Name = name
		}
		if c.Name != name {
			return fmt.Errorf("plan: computation %q registered under %q", c.Name, name)
		}
		if err := c.Code.Validate(); err != nil {
			return fmt.Errorf("plan: computation %s: %w", name, err)
		}
		c.withDefaults()
		for _, s := range c.Outputs {
			if w, ok := writers[s]; ok {
				return fmt.Errorf("plan: stream %s has two writers, %s and %s", s, w, name)
			}
			writers[s] = name
		}
		if to, ok := c.Source.(connector.TransformOnly); ok && c.Swift() {
			return fmt.Errorf("plan: computation %s is a SwiftMap reading source %s, which only a Transform may read: %s; use a Transform class", name, c.SourceStream, to.TransformOnly())
		}
		if c.Swift() && len(c.Sinks) > 0 {
			return fmt.Errorf("plan: computation %s: a SwiftMap cannot have sinks", name)
		}
		for _, t := range c.Code.ExternalStateWrites {
			if !c.ExternalStates[t].Write {
				return fmt.Errorf("plan: computation %s: its class writes external state table %s, which the computation does not list among the tables it writes (external_state_managers)", name, t)
			}
		}
		for t, a := range c.ExternalStates {
			if a.Write && c.Swift() {
				return fmt.Errorf("plan: computation %s is a SwiftMap and may not write external state table %s: its inputs are deduplicated by watermark only, so a redelivered input would apply a write twice; use a Transform", name, t)
			}
			if a.Table == nil || a.Table.Name != t {
				return fmt.Errorf("plan: computation %s: external state %s has no table declaration", name, t)
			}
		}
		if len(c.Timers) > 0 && c.Code.OnTimer == nil {
			return fmt.Errorf("plan: computation %s has timer streams but no OnTimer", name)
		}
	}
	return nil
}

// Order returns computation names sorted, for deterministic iteration.
func (p *Plan) Order() []string {
	names := make([]string, 0, len(p.Computations))
	for n := range p.Computations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Receivers returns the computations reading stream s, sorted by name.
func (p *Plan) Receivers(s string) []*CompPlan {
	var out []*CompPlan
	for _, n := range p.Order() {
		c := p.Computations[n]
		for _, in := range c.Inputs {
			if in == s {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// Writer returns the computation writing stream s.
func (p *Plan) Writer(s string) *CompPlan {
	for _, n := range p.Order() {
		c := p.Computations[n]
		for _, o := range c.Outputs {
			if o == s {
				return c
			}
		}
	}
	return nil
}

// Upstream returns the computations whose outputs c reads.
func (p *Plan) Upstream(c *CompPlan) []*CompPlan {
	var out []*CompPlan
	seen := map[string]bool{}
	for _, s := range c.Inputs {
		if w := p.Writer(s); w != nil && !seen[w.Name] {
			seen[w.Name] = true
			out = append(out, w)
		}
	}
	return out
}

// KeyOf computes the grouping key of payload under c's group_by columns. A
// column absent from payload is an error naming it (a present null value is
// a valid key part): grouping rows that lack the key under one shared key
// would silently merge them.
func (c *CompPlan) KeyOf(payload weir.Row) (weir.Key, error) {
	// Stack buffers for the usual few short columns: the key's string is
	// its one allocation.
	var valBuf [4]any
	var encBuf [64]byte
	vals := valBuf[:0]
	if len(c.GroupBy) > len(valBuf) {
		vals = make([]any, 0, len(c.GroupBy))
	}
	vals = vals[:len(c.GroupBy)]
	for i, col := range c.GroupBy {
		v, ok := payload[col]
		if !ok {
			return weir.Key{}, c.lacks(col, payload)
		}
		vals[i] = v
	}
	enc, err := codec.AppendKey(encBuf[:0], vals...)
	if err != nil {
		return weir.Key{}, fmt.Errorf("computation %s: group_by key: %w", c.Name, err)
	}
	k := weir.Key{Encoded: string(enc)}
	if len(vals) > 0 {
		if h, ok := vals[0].(uint64); ok {
			k.Hash = h
			return k, nil
		}
	}
	k.Hash = codec.Hash64(enc)
	return k, nil
}

// CheckGroupBy returns KeyOf's error for a row that lacks a group_by
// column, without computing the key: a job checks each output against its
// receivers when user code emits it, so that the failure is the call's
// (naming its input) rather than the epoch's.
func (c *CompPlan) CheckGroupBy(payload weir.Row) error {
	for _, col := range c.GroupBy {
		if _, ok := payload[col]; !ok {
			return c.lacks(col, payload)
		}
	}
	return nil
}

func (c *CompPlan) lacks(col string, payload weir.Row) error {
	return fmt.Errorf("computation %s groups by %q, which the row lacks (columns: %s)", c.Name, col, columnList(payload))
}

// columnList lists a row's column names, sorted, for error messages.
func columnList(r weir.Row) string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("… %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}

// PartitionIndex returns which of n equal hash ranges holds hash.
func PartitionIndex(hash uint64, n int) int {
	hi, _ := bits.Mul64(hash, uint64(n))
	return int(hi)
}

// PartitionRange returns the hash range [lo, hi) of partition i of n; toEnd
// reports that the range runs to the end of the hash space (hi is then 0).
func PartitionRange(i, n int) (lo, hi uint64, toEnd bool) {
	lo = rangeStart(i, n)
	if i == n-1 {
		return lo, 0, true
	}
	return lo, rangeStart(i+1, n), false
}

// rangeStart is the smallest hash h with PartitionIndex(h, n) == i.
func rangeStart(i, n int) uint64 {
	if i == 0 {
		return 0
	}
	// ceil(i * 2^64 / n)
	q, r := bits.Div64(uint64(i), 0, uint64(n))
	if r != 0 {
		q++
	}
	return q
}

// KeyedPartitionID names partition i of a keyed computation.
func KeyedPartitionID(comp string, i int) transport.PartitionID {
	return transport.PartitionID(comp + "/" + strconv.Itoa(i))
}

// SourcePartitionID names the partition of a source computation that reads
// source partition key.
func SourcePartitionID(comp, key string) transport.PartitionID {
	return transport.PartitionID(comp + "@" + key)
}

// PartitionSpec says which slice of a computation a job runs.
type PartitionSpec struct {
	ID transport.PartitionID
	// Index, Lo, Hi, ToEnd: the key-hash range [Lo, Hi) of a keyed
	// computation's partition (ToEnd: to the end of the hash space).
	Index int
	Lo    uint64
	Hi    uint64
	ToEnd bool
	// SourceKey is the source partition of a source computation.
	SourceKey string
}

// JobID identifies one run of a partition.
type JobID string

// JobSpec is what the controller decides about a job: which partition of
// which computation it runs, its id and its lease (created by the
// controller before the job starts), and the seed of its randomness.
type JobSpec struct {
	// Plan is the plan the job runs under: its receivers' partition counts
	// route its outputs. The controller sets it to its current layout's
	// plan; nil means the worker's own (a plan never rescaled).
	Plan      *Plan
	Comp      *CompPlan
	Partition PartitionSpec
	JobID     JobID
	Lease     store.LeaseID
	Seed      uint64
	// Fences are, for a rescaled computation's first jobs of a new layout,
	// the leases of its upstream partitions' new lives: a receiving node
	// refuses their earlier lives (transport/remote: Node.FenceBelow),
	// which routed by the old layout. The embedded engine fences them in
	// its Hub instead (transport.Hub.Fence).
	Fences map[transport.PartitionID]store.LeaseID
}
