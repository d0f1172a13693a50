package job

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// CrashPoint names a moment of the epoch at which tests simulate a crash.
type CrashPoint string

// The named crash points of an epoch.
const (
	// CrashBeforeCommit: user code ran, the transaction is built, nothing committed.
	CrashBeforeCommit CrashPoint = "before-commit"
	// CrashAfterCommitBeforeAck: the epoch committed; no post-commit effect
	// (sends, acks, offset reports) happened.
	CrashAfterCommitBeforeAck CrashPoint = "after-commit-before-ack"
	// CrashAfterAckBeforeErase: inputs were acknowledged upstream and outputs
	// offered downstream; delivered outputs are not yet erased from the
	// outbox (that happens in the next commit).
	CrashAfterAckBeforeErase CrashPoint = "after-ack-before-erase"
)

// ErrCrashed is returned by a job stopped at a crash point.
var ErrCrashed = errors.New("job: simulated crash")

// Hooks lets tests inject faults into a job. Crash returning a non-nil error
// stops the job at that point as if its process died: nothing after the
// point happens.
type Hooks interface {
	Crash(p transport.PartitionID, point CrashPoint) error
}

// Config is everything a job needs.
type Config struct {
	Plan      *plan.Plan
	Comp      *plan.CompPlan
	Partition plan.PartitionSpec
	JobID     plan.JobID
	Lease     store.LeaseID
	Store     store.Store
	Hub       Transport
	Board     Board
	Rand      *rand.Rand
	Hooks     Hooks
	Logf      func(format string, args ...any)
	// Finish, when closed, makes Run return nil after the epoch in flight
	// (a graceful move: the partition's next job continues from that
	// commit without redoing it). Nil: only ctx stops the job.
	Finish <-chan struct{}
}

// Job runs one partition of a computation: a loop of epochs, each fetching
// a batch, deduplicating it, running user code, and committing everything
// the batch changed in one transaction fenced by the job's lease (DESIGN.md
// §5, Flow's TTransformComputation order). Epoch is the deterministic core;
// Run drives it.
//
// A Job is not safe for concurrent use, except that acknowledgement
// callbacks from receivers and sinks may arrive on any goroutine: they are
// queued and applied on the job's goroutine at fixed points of the epoch.
type Job struct {
	cfg     Config
	comp    *plan.CompPlan
	st      store.Store
	outputs map[string]bool

	tx *txManager
	// txnHint is the number of mutations the next epoch's transaction is
	// sized for (store.Txn.Grow), from the recent epochs'.
	txnHint int
	// spareTxn is the last applied epoch's transaction, recycled by the
	// next (newTxn).
	spareTxn *store.Txn
	inputs   *inputStore
	states   *stateManager
	ext      *externalStates
	timers   *timerStore
	box      *outbox
	recv     transport.Receiver
	sinks    []*sinkInstance
	src      *sourceReader
	swift    *swiftTracker
	routes   map[string][]*plan.CompPlan // output stream → receiving computations
	// partitionIDs caches the partition ids of receiving computations.
	partitionIDs map[string][]transport.PartitionID
	// sinksOf lists the sinks reading each output stream.
	sinksOf map[string][]*sinkInstance
	// inline are the output streams whose outputs only inline sinks take
	// (inlineStreams); inlineAcks counts the calls of inlineDone, their
	// done (deliverInline).
	inline     map[string]bool
	inlineAcks atomic.Int64
	inlineDone func(error)
	// ackHooks are the acknowledgement hooks of offers, by route index
	// (ackHook).
	ackHooks []*transport.AckHook
	// offers holds outputs to offer downstream per receiving partition,
	// and those refused by full buffers (offers.go).
	offers offerQueues

	acks ackQueue
	// calls holds the buffers user-code calls reuse across epochs.
	calls callScratch
	// deadLettered counts the messages this job sent to the dead-letter
	// stream (deadletter.go).
	deadLettered uint64
	// skips are the messages of the computation an operator skipped, by
	// identity (tables/skip.go), loaded at Init; nil: none.
	skips map[string]tables.SkipRecord
	// parentOrigin maps this epoch's inputs that came on an ordered channel
	// (without an origin of their own) to their sender, for a job that
	// tags its outputs' origins (tagsOrigins).
	parentOrigin map[*weir.Message]transport.PartitionID
	// idIndex, idBuf and idEnds are materialize's buffers, reused.
	idIndex map[idCounter]uint64
	idBuf   []byte
	idEnds  []int
	// sender is this job's token for offering as its partition.
	sender transport.SenderToken
	// lastOffered is the last id offered per receiving partition, stream
	// and origin (checked under invariants: checkOfferOrder).
	lastOffered map[offerChannel]msgid.ID
	// suspect holds the ids of this epoch's inputs that may have been
	// delivered before (see transport.Delivery): only they need a dedup
	// lookup, and Swift outputs derived from them are suspect downstream.
	suspect map[msgid.ID]bool
	// origins is index-aligned with the inputs fetchInputs returned: the
	// channel each came from (the dedup frontier's key).
	origins []origin
	// quiesced: the last fetch saw board.Control.Quiesce and took nothing.
	quiesced bool

	lastTS     store.Timestamp
	eventWM    time.Time
	closed     bool
	epochCount int
	// decideStart, totals and lastEpoch feed the status's Totals and
	// LastEpoch (recordEpoch).
	decideStart time.Time
	totals      board.Counters
	lastEpoch   *board.EpochStats
}

type sinkInstance struct {
	plan plan.SinkPlan
	sink connector.Sink
}

// New builds a job; Init must run before the first Epoch.
func New(cfg Config) (*Job, error) {
	if cfg.Comp == nil || cfg.Plan == nil || cfg.Store == nil || cfg.Hub == nil || cfg.Board == nil {
		return nil, errors.New("job: config lacks plan, computation, store, hub or board")
	}
	if cfg.Lease == 0 {
		return nil, fmt.Errorf("job: job %s for %s has no lease", cfg.JobID, cfg.Partition.ID)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(cfg.Lease), 0))
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := cfg.Comp
	j := &Job{
		cfg:     cfg,
		comp:    c,
		st:      cfg.Store,
		outputs: map[string]bool{},
		routes:  map[string][]*plan.CompPlan{},
		suspect: map[msgid.ID]bool{},
	}
	j.acks.wake = make(chan struct{}, 1)
	for _, s := range c.Outputs {
		j.outputs[s] = true
		j.routes[s] = cfg.Plan.Receivers(s)
	}
	pid := string(cfg.Partition.ID)
	j.tx = newTxManager(cfg.Store, pid, cfg.Lease, c.LeaseCheckPeriod, cfg.Rand)
	j.tx.logf = cfg.Logf
	// Only internal inputs are deduplicated by id: a source's records are
	// deduplicated by their offsets (the position commits with the epoch),
	// and a Swift computation's inputs by watermark.
	own := tables.FrontierRange{Lo: cfg.Partition.Lo, Hi: cfg.Partition.Hi, ToEnd: cfg.Partition.ToEnd}
	j.inputs = newInputStore(cfg.Store, c.Name, own, c.CompactDedup, c.Mode == plan.ExactlyOnce && !c.Swift() && !c.IsSource())
	j.states = newStateManager(cfg.Store, c.Name, c.StateCacheBytes)
	j.ext = newExternalStates(cfg.Store, c)
	j.timers = newTimerStore(c.Name, c.Timers, c.TimerCountLimit, c.TimerBytesLimit)
	j.box = newOutbox(cfg.Store, pid)
	if c.Swift() {
		j.swift = newSwiftTracker()
	}
	return j, nil
}

// Partition returns the job's partition.
func (j *Job) Partition() transport.PartitionID { return j.cfg.Partition.ID }

func (j *Job) crash(point CrashPoint) error {
	if j.cfg.Hooks == nil {
		return nil
	}
	if err := j.cfg.Hooks.Crash(j.cfg.Partition.ID, point); err != nil {
		return fmt.Errorf("%s at %s: %w", j.cfg.Partition.ID, point, err)
	}
	return nil
}

// Init proves the lease with a first commit, then restores the partition
// from the last committed epoch: source position, timers, sink state and
// undelivered outputs (which it sends again with their original ids).
func (j *Job) Init(ctx context.Context) error {
	ts, err := j.st.Timestamp(ctx)
	if err != nil {
		return err
	}
	if err := j.tx.init(ctx, ts); err != nil {
		return fmt.Errorf("job %s: first commit: %w", j.cfg.Partition.ID, err)
	}
	j.lastTS = ts
	if j.skips, err = tables.LoadSkips(ctx, j.st, j.comp.Name); err != nil {
		return fmt.Errorf("job %s: load skipped messages: %w", j.cfg.Partition.ID, err)
	}
	// The lease is proven: fence the partition's previous sender (a zombie
	// may still run) before this job offers anything.
	j.sender = j.cfg.Hub.RegisterSender(j.cfg.Partition.ID, j.orderedSender())
	p := j.cfg.Partition
	if j.comp.IsSource() {
		j.src, err = openSourceReader(ctx, j, p.SourceKey)
		if err != nil {
			return err
		}
	} else {
		if err := j.inputs.loadFloors(ctx, j.comp.Inputs); err != nil {
			return err
		}
		if err := j.inputs.loadFrontiers(ctx); err != nil {
			return err
		}
		j.recv = j.cfg.Hub.Attach(p.ID)
	}
	if len(j.comp.Timers) > 0 {
		if err := j.timers.load(ctx, j.st, p.Lo, p.Hi, p.ToEnd); err != nil {
			return fmt.Errorf("job %s: load timers: %w", p.ID, err)
		}
	}
	for _, sp := range j.comp.Sinks {
		s, err := sp.New()
		if err != nil {
			return fmt.Errorf("job %s: sink %s: %w", p.ID, sp.ID, err)
		}
		name := "sink/" + sp.ID
		sc := connector.SinkContext{
			Store:       j.st,
			PartitionID: string(p.ID),
			SinkID:      sp.ID,
			LoadState: func(ctx context.Context) ([]byte, error) {
				v, _, err := j.st.Get(ctx, store.PartitionStates, tables.PartitionStateKey(string(p.ID), name))
				return v, err
			},
			SaveState: func(txn *store.Txn, state []byte) {
				txn.Put(store.PartitionStates, tables.PartitionStateKey(string(p.ID), name), state)
			},
			Logf: func(format string, args ...any) {
				j.cfg.Logf("sink %s of %s: "+format, append([]any{sp.ID, p.ID}, args...)...)
			},
			Dropped: func(n int) {
				j.cfg.Board.AddCounters(j.comp.Name, board.Counters{SinkDropped: uint64(n)})
			},
		}
		if err := s.Init(ctx, sc); err != nil {
			return fmt.Errorf("job %s: sink %s init: %w", p.ID, sp.ID, err)
		}
		si := &sinkInstance{plan: sp, sink: s}
		j.sinks = append(j.sinks, si)
		if j.sinksOf == nil {
			j.sinksOf = map[string][]*sinkInstance{}
		}
		j.sinksOf[sp.InputStream] = append(j.sinksOf[sp.InputStream], si)
	}
	j.inline = j.inlineStreams()
	j.inlineDone = func(err error) {
		if err == nil {
			j.inlineAcks.Add(1)
		}
	}
	if !j.comp.Swift() {
		msgs, err := j.box.load(ctx)
		if err != nil {
			return err
		}
		dests, err := j.destinations(msgs)
		if err != nil {
			return fmt.Errorf("job %s: outbox: %w", p.ID, err)
		}
		tokens := make([]any, len(msgs))
		for i, m := range msgs {
			tokens[i] = j.register(m, true)
		}
		// Reloaded outputs may have reached their receivers in an earlier
		// life of this partition: they must be deduplicated there.
		j.distribute(msgs, dests, tokens, nil, func(*weir.Message) bool { return true })
	}
	j.report(false)
	return nil
}

// Close stops the job's connectors. The lease is the controller's to abort.
func (j *Job) Close() error {
	if j.closed {
		return nil
	}
	j.closed = true
	var errs []error
	for _, s := range j.sinks {
		errs = append(errs, s.sink.Close())
	}
	if j.src != nil {
		errs = append(errs, j.src.close())
	}
	if j.recv != nil {
		j.recv.Detach()
	}
	return errors.Join(errs...)
}

// Run drives epochs until ctx ends or an epoch fails. Between idle epochs it
// waits for new input (internal, or a source that can say it grew:
// connector.ReadNotifier), room in a downstream buffer, or the empty-batch
// backoff.
func (j *Job) Run(ctx context.Context) error {
	defer j.Close()
	if err := j.Init(ctx); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if j.finishing() {
			return nil
		}
		res, err := j.Epoch(ctx)
		if err != nil {
			return err
		}
		if !res.Idle {
			if res.Fetched > 0 && res.Fetched < j.comp.Batch.MaxRows && j.comp.Batch.Duration > 0 {
				j.waitToFill(ctx, j.comp.Batch.Duration)
			}
			continue
		}
		var notify, input <-chan struct{}
		if j.recv != nil {
			notify = j.recv.Notify()
		}
		if j.src != nil {
			input = j.src.wake()
		}
		room := j.roomWait()
		t := time.NewTimer(j.comp.Batch.EmptyBackoff)
		select {
		case <-ctx.Done():
		case <-notify:
		case <-input:
		case <-room:
		case <-j.acks.wake:
		case <-j.cfg.Board.ControlChanged(j.comp.Name):
		case <-j.cfg.Finish:
		case <-t.C:
		}
		t.Stop()
	}
}

// finishing reports whether Config.Finish is closed.
func (j *Job) finishing() bool {
	select {
	case <-j.cfg.Finish:
		return true
	default:
		return false
	}
}

// waitToFill waits, after an epoch whose batch was not full, until a full
// batch of internal input is available or d has passed (batch_duration):
// larger batches amortise a commit over more messages. A source job cannot
// see what its source holds, so it waits d before reading again.
func (j *Job) waitToFill(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		var notify <-chan struct{}
		if j.recv != nil {
			if j.recv.Available() >= j.comp.Batch.MaxRows {
				return
			}
			notify = j.recv.Notify()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-notify:
		}
	}
}

// orderedSender says whether this partition's channels are ordered
// (transport.Delivery): on each stream it offers every receiving partition
// strictly increasing ids, in every life. A Transform's outputs have ids
// hex16(epoch timestamp)-stream:lex(index), numbered in emission order,
// offered in emission order (offers queue behind a refused one) and
// reloaded from the outbox in id order before any new epoch. A Swift
// source's outputs inherit ids hex16(memorized sequence number)-…:lex(offset)
// whose order is the records' order (sequence numbers are memorized per
// offset range in increasing order, and reused on replay), and it offers
// each epoch's outputs sorted by id (sortByID). A Swift computation fed by
// other partitions interleaves its upstreams' ids, and merged ids are
// digests: those channels are not ordered; but each origin's part of them
// is (tagsOrigins), and is deduplicated by a frontier of its own.
func (j *Job) orderedSender() bool {
	if !j.comp.Swift() {
		return true
	}
	return j.comp.IsSource() && !j.comp.AllowBatching
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
