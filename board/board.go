// Package board is the exchange between a pipeline's jobs and its
// controller: jobs post their status after every epoch, the controller
// posts each computation's control (watermarks, draining, upstream done)
// and reads the statuses. The embedded engine keeps it in memory; a
// network deployment carries the same data in worker heartbeats.
package board

import (
	"sync"
	"time"

	"github.com/weir-stream/weir/plan"

	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Status is what a job reports about its partition after every epoch (the
// embedded form of Flow's heartbeat job status).
type Status struct {
	Partition   transport.PartitionID
	Computation string
	Job         plan.JobID
	// Epoch is the timestamp of the job's last epoch.
	Epoch store.Timestamp
	// At is when the status was posted, by the store's clock. A job whose
	// status goes stale is lost (stuck, or its worker is gone).
	At time.Time
	// SystemWM maps each output stream to a lower bound of the
	// SystemTimestamp of every output on it that is not yet delivered, now or
	// in the future. The controller takes the minimum over writers as the
	// stream's SystemWatermark.
	SystemWM map[string]store.Timestamp
	// EventWM is the partition's event-time watermark for its outputs;
	// EventIdle says the partition is idle and must not hold it back.
	EventWM   time.Time
	EventIdle bool
	// Drained: nothing of the partition is in flight — no buffered or
	// unacknowledged input, no undelivered output, no pending timer, and for a
	// finite source, the end has been read and committed.
	Drained bool
	// AppliedInputWM echoes the input SystemWatermarks the job's epochs use
	// from now on. The controller garbage-collects a stream's dedup rows only
	// below the minimum every partition has applied: a job whose epoch
	// started with an older watermark could otherwise look up a row deleted
	// under it and process a re-sent message twice.
	AppliedInputWM map[string]store.Timestamp
	// Quiet: nothing of the partition is in flight (no buffered or
	// unacknowledged input, no undelivered output); timers may remain.
	Quiet bool
	// DrainingSeen echoes the control's Draining at the time of the report.
	DrainingSeen bool
	// Quiesced: the control said Quiesce when the job last fetched, and
	// nothing it took is in flight — no undelivered or unerased output, no
	// output held by a sink. Input buffered for it may wait.
	Quiesced bool
	// SinkFailures maps a sink id to the error that stopped its delivery
	// (for example an HTTP sink whose retries ran out): the partition's
	// progress through that sink is stopped until the job restarts, so the
	// controller treats it as a job failure — it removes the job (aborting
	// its lease) and restarts the partition with backoff.
	SinkFailures map[string]string
	// UpstreamDoneSeen echoes the control's UpstreamDone at the time of the
	// report, so the controller knows Drained was computed after it.
	UpstreamDoneSeen bool
	// Totals are the counts of this job's epochs so far (its successor
	// starts from zero), and LastEpoch describes its last epoch that did
	// work (nil before one): for the web console's per-partition rates
	// and epoch history. Nothing decides on them.
	Totals    Counters
	LastEpoch *EpochStats `json:",omitempty"`
}

// EpochStats describes one epoch of a job, as its status reports it.
type EpochStats struct {
	// TS is the epoch's timestamp; At when it was applied (wall clock).
	TS store.Timestamp
	At time.Time
	// Inputs, Duplicates and Outputs count the epoch's messages; Writes
	// and Bytes its transaction's mutations and their key and value bytes
	// (0 when it committed nothing).
	Inputs, Duplicates, Outputs int
	Writes, Bytes               int
	// Duration runs from the start of the epoch's decision to the end of
	// its commit; Commit is the commit alone (the store's latency).
	Duration, Commit time.Duration
	// Committed: the epoch committed a transaction (a Swift epoch with
	// nothing to persist commits nothing).
	Committed bool
}

// Control is what the controller tells a computation's jobs.
type Control struct {
	// InputSystemWM maps each input stream to its SystemWatermark.
	InputSystemWM map[string]store.Timestamp
	// EventWM is the computation's input event-time watermark.
	EventWM time.Time
	// UpstreamDone: every upstream computation has completed, so no input
	// will ever arrive again.
	UpstreamDone bool
	// Draining: stop reading sources and firing timers; finish what is in flight.
	Draining bool
	// Quiesce: the computation is being rescaled (controller/rescale.go):
	// take no input at all — no source batch, no buffered input, no timer
	// — and deliver the outbox, so that no output of this layout is in
	// flight when the next layout's jobs start sending under the same
	// partition ids.
	Quiesce bool
}

// Counters are cumulative per-computation counts of epoch work, summed over
// all its jobs (restarts included: re-processed inputs count again).
type Counters struct {
	Epochs     uint64
	Commits    uint64
	Inputs     uint64 // fresh inputs processed
	Duplicates uint64 // inputs found already processed and dropped
	Outputs    uint64
	// SinkDropped counts outputs an at-most-once sink gave up (queue
	// overflow, a failed write, abandoned when the sink stopped):
	// connector.SinkContext.ReportDropped.
	SinkDropped uint64
	// DeadLettered counts inputs whose processing failed and that went to
	// the computation's dead-letter stream (committed epochs only).
	DeadLettered uint64
}

// Add adds d to c.
func (c *Counters) Add(d Counters) {
	c.Epochs += d.Epochs
	c.Commits += d.Commits
	c.Inputs += d.Inputs
	c.Duplicates += d.Duplicates
	c.Outputs += d.Outputs
	c.SinkDropped += d.SinkDropped
	c.DeadLettered += d.DeadLettered
}

// Board is the in-process exchange between jobs and the controller: jobs
// post statuses, the controller posts controls. A network deployment carries
// the same data in worker heartbeats.
//
// Ownership: the controller tells the board which job owns each partition
// (Assign when it starts a job, Release when it removes one). From then on
// the board keeps only statuses posted by the partition's current owner: a
// replaced job (a zombie: frozen, on a lost worker, or simply slow to exit)
// may still post, and its report — a watermark, "drained", "quiet" — describes
// a life of the partition that is over. Such posts are dropped and counted
// (DroppedPosts). Assign and Release also forget the previous status, so
// that every decision the controller bases on a status reads one posted by
// the job that runs the partition now. A partition the controller never
// assigned (a board used without a controller, in tests) accepts any post.
type Board struct {
	mu       sync.Mutex
	statuses map[transport.PartitionID]Status
	owners   map[transport.PartitionID]plan.JobID // "" = assigned to no job
	dropped  int
	controls map[string]Control
	counters map[string]*Counters
	// changed holds, per computation, a channel closed (and replaced) when
	// its control's UpstreamDone or Draining changes: idle jobs wait on it.
	changed map[string]chan struct{}
	// decided is signalled when a post may let the controller decide
	// something (a partition turned drained, quiet while draining, or
	// quiesced).
	decided chan struct{}
}

// NewBoard returns an empty board.
func NewBoard() *Board {
	return &Board{statuses: map[transport.PartitionID]Status{}, owners: map[transport.PartitionID]plan.JobID{},
		controls: map[string]Control{}, counters: map[string]*Counters{},
		changed: map[string]chan struct{}{}, decided: make(chan struct{}, 1)}
}

// ControlChanged returns a channel that is closed when computation comp's
// control next changes its UpstreamDone or Draining: an idle job waits on
// it so that a drain or its upstream's completion reaches it at once rather
// than after its empty-batch backoff.
func (b *Board) ControlChanged(comp string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changedLocked(comp)
}

// REQUIRES: b.mu held.
func (b *Board) changedLocked(comp string) chan struct{} {
	c, ok := b.changed[comp]
	if !ok {
		c = make(chan struct{})
		b.changed[comp] = c
	}
	return c
}

// Decided returns a channel signalled (one slot, never closed) when a post
// turned a partition drained, or quiet while draining: the controller's Run
// cycles on it as well as on its period, so completion and the end of a
// drain are seen at once.
func (b *Board) Decided() <-chan struct{} { return b.decided }

// Assign makes job the owner of partition p and forgets p's last status (it
// was posted by an earlier job). The controller calls it before the job
// starts, so the job's first post is accepted. Assigning the owner again (a
// controller adopting the job) keeps its status.
func (b *Board) Assign(p transport.PartitionID, job plan.JobID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owners[p] == job && job != "" {
		return // the same job (a controller taking it over): its status stays
	}
	b.owners[p] = job
	delete(b.statuses, p)
}

// Release records that partition p has no job any more and forgets its last
// status: until the next Assign every post for p is dropped.
func (b *Board) Release(p transport.PartitionID) { b.Assign(p, "") }

// DroppedPosts returns how many posts came from a job that did not own its
// partition at the time (replaced or removed jobs).
func (b *Board) DroppedPosts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// AddCounters adds an epoch's counts to a computation's totals.
func (b *Board) AddCounters(comp string, d Counters) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.counters[comp]
	if !ok {
		c = &Counters{}
		b.counters[comp] = c
	}
	c.Add(d)
}

// Counters returns a copy of every computation's totals.
func (b *Board) Counters() map[string]Counters {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]Counters, len(b.counters))
	for k, v := range b.counters {
		out[k] = *v
	}
	return out
}

// Statuses returns a copy of every partition's last status.
func (b *Board) Statuses() map[transport.PartitionID]Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[transport.PartitionID]Status, len(b.statuses))
	for k, v := range b.statuses {
		out[k] = v
	}
	return out
}

// Post records a job's status, unless the partition is assigned to another
// job (or to none): then the post is dropped and counted.
func (b *Board) Post(s Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if owner, assigned := b.owners[s.Partition]; assigned && owner != s.Job {
		b.dropped++
		return
	}
	prev, had := b.statuses[s.Partition]
	b.statuses[s.Partition] = s
	if (s.Drained && (!had || !prev.Drained)) || (s.Quiet && s.DrainingSeen && (!had || !prev.Quiet || !prev.DrainingSeen)) ||
		(s.Quiesced && (!had || !prev.Quiesced)) {
		select {
		case b.decided <- struct{}{}:
		default:
		}
	}
}

// Status returns the last status of partition p posted by its current job.
func (b *Board) Status(p transport.PartitionID) (Status, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.statuses[p]
	return s, ok
}

// SetControl publishes the control of a computation. Published watermarks
// never decrease (checked under invariants): a job's epoch relies on "every
// message below the SystemWatermark is processed" and on event time moving
// forward, and a job started later reads only the newest control.
func (b *Board) SetControl(comp string, c Control) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if invariants.Enabled {
		if prev, ok := b.controls[comp]; ok {
			for s, w := range prev.InputSystemWM {
				invariants.Check(c.InputSystemWM[s] >= w, "SystemWatermark of %s for %s went down: %v → %v", s, comp, w, c.InputSystemWM[s])
			}
			invariants.Check(!c.EventWM.Before(prev.EventWM), "event watermark of %s went down: %v → %v", comp, prev.EventWM, c.EventWM)
		}
	}
	prev, had := b.controls[comp]
	b.controls[comp] = c
	if !had || prev.UpstreamDone != c.UpstreamDone || prev.Draining != c.Draining || prev.Quiesce != c.Quiesce {
		close(b.changedLocked(comp))
		delete(b.changed, comp)
	}
}

// Control returns the control of a computation.
func (b *Board) Control(comp string) Control {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.controls[comp]
}
