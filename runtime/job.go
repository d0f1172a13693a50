package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

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
var ErrCrashed = errors.New("runtime: simulated crash")

// Hooks lets tests inject faults into a job. Crash returning a non-nil error
// stops the job at that point as if its process died: nothing after the
// point happens.
type Hooks interface {
	Crash(p transport.PartitionID, point CrashPoint) error
}

// Config is everything a job needs.
type Config struct {
	Plan      *Plan
	Comp      *CompPlan
	Partition PartitionSpec
	JobID     JobID
	Lease     store.LeaseID
	Store     store.Store
	Hub       *transport.Hub
	Board     *Board
	Rand      *rand.Rand
	Hooks     Hooks
	Logf      func(format string, args ...any)
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
	comp    *CompPlan
	st      store.Store
	outputs map[string]bool

	tx     *txManager
	inputs *inputStore
	states *stateManager
	timers *timerStore
	box    *outbox
	recv   transport.Receiver
	sinks  []*sinkInstance
	src    *sourceReader
	swift  *swiftTracker
	routes map[string][]*CompPlan // output stream → receiving computations
	// pending holds offers refused by full buffers, in emission order, and
	// every later offer to a destination that has one waiting: outputs of
	// this partition reach each receiving partition in emission order (the
	// lineage ordering guarantee), so nothing may overtake a refused offer.
	pending []pendingOffer
	// waiting counts the pending offers per destination.
	waiting map[transport.PartitionID]int

	acks ackQueue
	// sender is this job's token for offering as its partition.
	sender transport.SenderToken
	// suspect holds the ids of this epoch's inputs that may have been
	// delivered before (see transport.Delivery): only they need a dedup
	// lookup, and Swift outputs derived from them are suspect downstream.
	suspect map[msgid.ID]bool

	lastTS     store.Timestamp
	eventWM    time.Time
	closed     bool
	epochCount int
}

type sinkInstance struct {
	plan SinkPlan
	sink connector.Sink
}

type pendingOffer struct {
	msg      *weir.Message
	size     int
	dest     transport.PartitionID
	ack      transport.AckFunc
	maybeDup bool
}

// ackQueue collects callbacks from other goroutines for the job's goroutine.
type ackQueue struct {
	mu    sync.Mutex
	items []func()
}

func (q *ackQueue) push(f func()) {
	q.mu.Lock()
	q.items = append(q.items, f)
	q.mu.Unlock()
}

func (q *ackQueue) drain() {
	q.mu.Lock()
	items := q.items
	q.items = nil
	q.mu.Unlock()
	for _, f := range items {
		f()
	}
}

// NewJob builds a job; Init must run before the first Epoch.
func NewJob(cfg Config) (*Job, error) {
	if cfg.Comp == nil || cfg.Plan == nil || cfg.Store == nil || cfg.Hub == nil || cfg.Board == nil {
		return nil, errors.New("runtime: job config lacks plan, computation, store, hub or board")
	}
	if cfg.Lease == 0 {
		return nil, fmt.Errorf("runtime: job %s for %s has no lease", cfg.JobID, cfg.Partition.ID)
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
		routes:  map[string][]*CompPlan{},
		suspect: map[msgid.ID]bool{},
		waiting: map[transport.PartitionID]int{},
	}
	for _, s := range c.Outputs {
		j.outputs[s] = true
		j.routes[s] = cfg.Plan.Receivers(s)
	}
	pid := string(cfg.Partition.ID)
	j.tx = newTxManager(cfg.Store, pid, cfg.Lease, c.LeaseCheckPeriod, cfg.Rand)
	j.inputs = newInputStore(cfg.Store, c.Name, c.CompactDedup, c.Mode == ExactlyOnce && !c.Swift())
	j.states = newStateManager(cfg.Store, c.Name, c.StateCacheBytes)
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
	// The lease is proven: fence the partition's previous sender (a zombie
	// may still run) before this job offers anything.
	j.sender = j.cfg.Hub.RegisterSender(j.cfg.Partition.ID)
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
				v, _, err := j.st.Get(ctx, store.PartitionStates, partitionStateKey(string(p.ID), name))
				return v, err
			},
			SaveState: func(txn *store.Txn, state []byte) {
				txn.Put(store.PartitionStates, partitionStateKey(string(p.ID), name), state)
			},
			Logf: func(format string, args ...any) {
				j.cfg.Logf("sink %s of %s: "+format, append([]any{sp.ID, p.ID}, args...)...)
			},
		}
		if err := s.Init(ctx, sc); err != nil {
			return fmt.Errorf("job %s: sink %s init: %w", p.ID, sp.ID, err)
		}
		j.sinks = append(j.sinks, &sinkInstance{plan: sp, sink: s})
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
		for _, m := range msgs {
			j.register(m, true)
		}
		// Reloaded outputs may have reached their receivers in an earlier
		// life of this partition: they must be deduplicated there.
		j.distribute(msgs, dests, func(*weir.Message) bool { return true })
	}
	j.report(false)
	return nil
}

// EpochResult says what an epoch did.
type EpochResult struct {
	// Committed: the epoch committed a transaction (work or lease probe).
	Committed bool
	// Idle: there was nothing to do; the driver should wait for input.
	Idle bool
	// Inputs, Duplicates, Outputs count this epoch's messages.
	Inputs, Duplicates, Outputs int
	// Fetched counts the input rows taken this epoch (internal inputs or
	// source records), before deduplication.
	Fetched int
}

// Epoch runs one iteration, in Flow's order: apply control and watermarks,
// check output limits, fetch, take the epoch timestamp, deduplicate, run user
// code grouped by key (timers first), register dedup ids, outputs and
// timers, commit once with the lease as prerequisite, then start post-commit
// effects (sink sends, downstream offers, offset reports) and acknowledge the
// inputs upstream.
func (j *Job) Epoch(ctx context.Context) (EpochResult, error) {
	var res EpochResult
	if j.closed {
		return res, errors.New("runtime: epoch on a closed job")
	}
	j.epochCount++
	// 1. Control: watermarks and draining.
	ctl := j.cfg.Board.Control(j.comp.Name)
	for s, wm := range ctl.InputSystemWM {
		j.inputs.advance(s, wm)
	}
	if ctl.EventWM.After(j.eventWM) {
		j.eventWM = ctl.EventWM
	}
	j.acks.drain()
	j.retryOffers()

	// 2. Backpressure: a full outbox (or too many Swift outputs in flight)
	// blocks input.
	n, bytes := j.box.undelivered()
	if j.swift != nil {
		n += j.swift.count()
		bytes += j.swift.heldBytes()
	}
	blocked := n >= j.comp.OutputStoreCountLimit || bytes >= j.comp.OutputStoreBytesLimit

	// 3. Fetch.
	var msgs []*weir.Message
	var srcBatch *sourceBatch
	var err error
	clear(j.suspect)
	if !blocked && !ctl.Draining {
		if j.src != nil {
			srcBatch, err = j.src.read(ctx, j.comp.Batch.MaxRows, j.comp.Batch.MaxBytes)
			if err != nil {
				return res, err
			}
		}
	}
	if !blocked && j.recv != nil {
		if msgs, err = j.fetchInputs(); err != nil {
			return res, err
		}
	}
	var fired []*timerEntry
	if len(j.comp.Timers) > 0 && !ctl.Draining && !blocked {
		fired = j.timers.due(j.eventWM, j.st.Now(), j.comp.Batch.MaxRows)
	}
	srcDirty := j.src != nil && j.src.dirty()
	work := len(msgs) > 0 || len(fired) > 0 || (srcBatch != nil && len(srcBatch.records) > 0) ||
		len(j.box.erase) > 0 || srcDirty || j.sinksPending()
	if !work {
		res.Idle = true
		if j.tx.probeDue() {
			// An idle job still commits a nearly empty transaction once per
			// lease_check_period, to learn that its lease is gone.
			ts, err := j.st.Timestamp(ctx)
			if err != nil {
				return res, err
			}
			if err := j.tx.commit(ctx, store.NewTxn(j.cfg.Lease), ts); err != nil {
				return res, fmt.Errorf("job %s: lease probe: %w", j.cfg.Partition.ID, err)
			}
			j.lastTS = ts
			res.Committed = true
		}
		j.flushSwift()
		j.report(true)
		return res, nil
	}

	// 4. The epoch's unique timestamp (sequence number).
	ts, err := j.st.Timestamp(ctx)
	if err != nil {
		return res, err
	}
	if srcBatch != nil {
		msgs = j.src.messages(srcBatch, ts)
	}
	res.Fetched = len(msgs)

	// 5. Dedup. Inputs found already processed are acknowledged at once.
	fresh, dups, err := j.inputs.filter(ctx, msgs, j.suspect)
	if err != nil {
		return res, err
	}
	res.Inputs, res.Duplicates = len(fresh), len(dups)
	if len(dups) > 0 && j.recv != nil {
		j.recv.Ack(ids(dups)...)
	}

	// 6. User code, grouped by key: timers, then messages.
	emits, err := j.process(ctx, ts, fresh, fired)
	if err != nil {
		return res, err
	}

	// 7–9. Dedup ids, outputs, timers.
	txn := store.NewTxn(j.cfg.Lease)
	j.inputs.register(txn, fresh)
	outs, lineage, err := j.materialize(ts, emits)
	if err != nil {
		return res, err
	}
	dests, err := j.destinations(outs)
	if err != nil {
		return res, err
	}
	res.Outputs = len(outs)
	if j.swift != nil {
		j.swift.track(fresh, outs, lineage)
	}
	for _, m := range outs {
		j.register(m, false)
	}
	j.timers.sync(txn)

	// 10. Prepare and commit.
	j.acks.drain()
	if j.src != nil {
		if err := j.src.sync(txn, srcBatch); err != nil {
			return res, err
		}
	}
	if err := j.box.sync(txn); err != nil {
		return res, err
	}
	for _, s := range j.sinks {
		if err := s.sink.Sync(ctx, txn); err != nil {
			return res, fmt.Errorf("job %s: sink %s: %w", j.cfg.Partition.ID, s.plan.ID, err)
		}
	}
	if err := j.states.sync(txn); err != nil {
		return res, err
	}
	if err := j.crash(CrashBeforeCommit); err != nil {
		return res, err
	}
	if !j.comp.Swift() || !txn.Empty() || j.tx.probeDue() {
		if err := j.tx.commit(ctx, txn, ts); err != nil {
			return res, fmt.Errorf("job %s: commit: %w", j.cfg.Partition.ID, err)
		}
		res.Committed = true
	}
	j.lastTS = ts
	if j.comp.Mode == ExactlyOnce && !j.comp.Swift() && j.recv != nil {
		applied.record(j.st, string(j.cfg.Partition.ID), fresh, j.inputs.watermarks)
	}
	j.box.committed()
	j.timers.committed()
	j.states.committed()
	if err := j.crash(CrashAfterCommitBeforeAck); err != nil {
		return res, err
	}

	// 11. Post-commit effects.
	if j.src != nil {
		j.src.committed(ctx, srcBatch)
	}
	for _, s := range j.sinks {
		s.sink.Commit(ctx)
	}
	j.distribute(outs, dests, j.outputSuspect(outs, lineage))
	if len(fresh) > 0 {
		// Report before acknowledging the inputs upstream: once an upstream
		// partition learns its outputs were processed it may report quiet,
		// and the controller must not pair that with this partition's report
		// from before the epoch, which lacks the outputs just made (a drain
		// would look finished while they are in flight).
		j.report(false)
	}
	if j.recv != nil && !j.comp.Swift() {
		j.recv.Ack(ids(fresh)...)
	}
	j.acks.drain()
	j.flushSwift()
	j.cfg.Board.AddCounters(j.comp.Name, Counters{Epochs: 1, Commits: b2u(res.Committed),
		Inputs: uint64(res.Inputs), Duplicates: uint64(res.Duplicates), Outputs: uint64(res.Outputs)})
	if err := j.crash(CrashAfterAckBeforeErase); err != nil {
		return res, err
	}
	j.report(false)
	return res, nil
}

// sinksPending reports whether a sink has progress to record.
func (j *Job) sinksPending() bool {
	for _, s := range j.sinks {
		if p, ok := s.sink.(connector.PendingSyncer); ok && p.PendingSync() {
			return true
		}
	}
	return false
}

// fetchInputs takes a batch from the transport and computes each message's
// key under this computation's group_by. The message struct is copied: the
// sender keeps its own. A message whose key cannot be computed fails the
// epoch, naming it: grouping it under some other key would silently change
// results. (Senders check their outputs' keys before they commit them, so
// this happens only to data written before that check existed.)
func (j *Job) fetchInputs() ([]*weir.Message, error) {
	raw := j.recv.Fetch(j.comp.Batch.MaxRows, j.comp.Batch.MaxBytes)
	out := make([]*weir.Message, 0, len(raw))
	for _, d := range raw {
		m := d.Msg
		if d.MaybeDuplicate {
			j.suspect[m.ID] = true
		}
		cp := *m
		k, err := j.comp.KeyOf(cp.Payload)
		if err != nil {
			return nil, fmt.Errorf("job %s: input %s on stream %s: %w", j.cfg.Partition.ID, m.ID, m.Stream, err)
		}
		cp.Key = k
		out = append(out, &cp)
	}
	return out, nil
}

func ids(msgs []*weir.Message) []msgid.ID {
	out := make([]msgid.ID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// group is the work of one key in one epoch.
type group struct {
	key    weir.Key
	timers []*timerEntry
	msgs   []*weir.Message
}

// process runs user code for every key with fired timers or fresh
// messages; each call goes through runUser (recover.go), which turns its
// failure into a *UserCodeError naming the input.
func (j *Job) process(ctx context.Context, ts store.Timestamp, msgs []*weir.Message, fired []*timerEntry) ([]emitted, error) {
	groups := map[string]*group{}
	get := func(k weir.Key) *group {
		g, ok := groups[k.Encoded]
		if !ok {
			g = &group{key: k}
			groups[k.Encoded] = g
		}
		return g
	}
	for _, t := range fired {
		g := get(t.key)
		g.timers = append(g.timers, t)
	}
	for _, m := range msgs {
		g := get(m.Key)
		g.msgs = append(g.msgs, m)
	}
	order := make([]*group, 0, len(groups))
	for _, g := range groups {
		order = append(order, g)
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].key.Hash != order[b].key.Hash {
			return order[a].key.Hash < order[b].key.Hash
		}
		return order[a].key.Encoded < order[b].key.Encoded
	})
	var out []emitted
	code := j.comp.Code
	for _, g := range order {
		cc := &callContext{ctx: ctx, job: j, key: g.key, now: ts, eventWM: j.eventWM}
		for _, t := range g.timers {
			col := &collector{job: j, key: g.key, timer: &t.t}
			if err := j.runUser(userCall{timer: &t.t}, col, func() error { return code.OnTimer(cc, &t.t, col) }); err != nil {
				return nil, err
			}
			out = append(out, col.out...)
		}
		if len(g.msgs) == 0 {
			continue
		}
		sort.SliceStable(g.msgs, func(a, b int) bool {
			x, y := g.msgs[a], g.msgs[b]
			if x.AlignmentTimestamp != y.AlignmentTimestamp {
				return x.AlignmentTimestamp < y.AlignmentTimestamp
			}
			return x.ID < y.ID
		})
		if code.OnMessages != nil {
			col := &collector{job: j, key: g.key, defaults: g.msgs, allowed: allowedSet(g.msgs)}
			if err := j.runUser(userCall{msgs: g.msgs}, col, func() error { return code.OnMessages(cc, g.msgs, col) }); err != nil {
				return nil, err
			}
			out = append(out, col.out...)
		} else {
			for _, m := range g.msgs {
				one := []*weir.Message{m}
				col := &collector{job: j, key: g.key, defaults: one, allowed: allowedSet(one)}
				if err := j.runUser(userCall{msgs: one}, col, func() error { return code.OnMessage(cc, m, col) }); err != nil {
					return nil, err
				}
				out = append(out, col.out...)
			}
		}
		if cc.err != nil {
			return nil, cc.err
		}
	}
	return out, nil
}

func allowedSet(msgs []*weir.Message) map[*weir.Message]bool {
	s := make(map[*weir.Message]bool, len(msgs))
	for _, m := range msgs {
		s[m] = true
	}
	return s
}

// materialize assigns ids and meta to emitted outputs and registers timers.
// Transform outputs get ordered ids from the epoch timestamp; SwiftMap
// outputs inherit their parent's id (or a merged id of several parents).
func (j *Job) materialize(ts store.Timestamp, emits []emitted) ([]*weir.Message, [][]*weir.Message, error) {
	var outs []*weir.Message
	var lineage [][]*weir.Message
	index := map[string]uint64{}
	for _, e := range emits {
		if e.isTimer {
			ev := e.req.EventTimestamp
			if ev.IsZero() {
				ev = e.req.Trigger
			}
			n := index["\x00timer\x00"+e.stream]
			index["\x00timer\x00"+e.stream]++
			id := msgid.Ordered(uint64(ts), e.stream, n)
			if err := j.timers.add(&timerEntry{key: e.key, t: weir.Timer{
				ID: id, Stream: e.stream, Key: e.key, TriggerTimestamp: e.req.Trigger,
				EventTimestamp: ev, SystemTimestamp: ts,
			}}); err != nil {
				return nil, nil, err
			}
			continue
		}
		m := &weir.Message{Stream: e.stream, Payload: e.row}
		if j.comp.Swift() {
			if err := inheritMeta(m, e.parents, index); err != nil {
				return nil, nil, fmt.Errorf("computation %s: %w", j.comp.Name, err)
			}
		} else {
			n := index[e.stream]
			index[e.stream]++
			m.ID = msgid.Ordered(uint64(ts), e.stream, n)
			m.SystemTimestamp, m.AlignmentTimestamp = ts, ts
			m.EventTimestamp = minEventTime(e.parents)
			if e.timer != nil && m.EventTimestamp.IsZero() {
				m.EventTimestamp = e.timer.EventTimestamp
			}
		}
		outs = append(outs, m)
		lineage = append(lineage, e.parents)
	}
	return outs, lineage, nil
}

// inheritMeta gives a Swift output its deterministic id and timestamps.
func inheritMeta(m *weir.Message, parents []*weir.Message, index map[string]uint64) error {
	var base msgid.ID
	if len(parents) == 1 {
		p := parents[0]
		base = p.ID
		m.SystemTimestamp, m.AlignmentTimestamp, m.EventTimestamp = p.SystemTimestamp, p.AlignmentTimestamp, p.EventTimestamp
	} else {
		pids := make([]msgid.ID, len(parents))
		for i, p := range parents {
			pids[i] = p.ID
		}
		var err error
		if base, err = msgid.Merged(pids); err != nil {
			return err
		}
		// SystemTimestamp = max over parents, so the receiver's watermark
		// filter never drops the merged message; the others are the minimum.
		m.SystemTimestamp, m.AlignmentTimestamp = parents[0].SystemTimestamp, parents[0].AlignmentTimestamp
		m.EventTimestamp = minEventTime(parents)
		for _, p := range parents[1:] {
			m.SystemTimestamp = max(m.SystemTimestamp, p.SystemTimestamp)
			m.AlignmentTimestamp = min(m.AlignmentTimestamp, p.AlignmentTimestamp)
		}
	}
	k := string(base) + "\x00" + m.Stream
	n := index[k]
	index[k]++
	m.ID = msgid.Inherited(base, m.Stream, n)
	return nil
}

func minEventTime(msgs []*weir.Message) time.Time {
	var t time.Time
	for _, m := range msgs {
		if !m.EventTimestamp.IsZero() && (t.IsZero() || m.EventTimestamp.Before(t)) {
			t = m.EventTimestamp
		}
	}
	return t
}

// register gives an output its destinations: every sink consuming its
// stream and every downstream partition. Sinks get it now (a sync sink
// writes it inside this epoch's transaction); downstream partitions only
// after the commit (distribute).
func (j *Job) register(m *weir.Message, persisted bool) {
	dests := len(j.routes[m.Stream])
	var sinks []*sinkInstance
	for _, s := range j.sinks {
		if s.plan.InputStream == m.Stream {
			sinks = append(sinks, s)
		}
	}
	dests += len(sinks)
	if j.comp.Swift() {
		j.swift.expect(m, dests)
		return
	}
	out := j.box.add(m, dests, persisted)
	for _, s := range sinks {
		done := j.onDelivered(out, m.ID, s.plan.ID)
		if a, ok := s.sink.(connector.AtMostOnce); persisted && ok && a.DeliversAtMostOnce() {
			// Reloaded after a restart: an earlier life may have handed it
			// to this sink already (connector.AtMostOnce).
			done(nil)
			continue
		}
		s.sink.Distribute(m, done)
	}
}

// onDelivered returns the done callback of one destination of an output.
func (j *Job) onDelivered(out *output, id msgid.ID, dest string) func(error) {
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			if err != nil {
				j.cfg.Logf("%s: output %s to %s failed: %v (kept in the outbox)", j.cfg.Partition.ID, id, dest, err)
				return
			}
			j.acks.push(func() { j.box.ack(out) })
		})
	}
}

// outputSuspect says which of this epoch's outputs may have been delivered
// before: a Swift output recomputed from a suspect input (its id is
// inherited, so an earlier life may have sent it). A Transform output has a
// fresh id and has never been sent.
func (j *Job) outputSuspect(outs []*weir.Message, lineage [][]*weir.Message) func(*weir.Message) bool {
	if !j.comp.Swift() || len(j.suspect) == 0 {
		return func(*weir.Message) bool { return false }
	}
	sus := make(map[msgid.ID]bool)
	for i, m := range outs {
		for _, p := range lineage[i] {
			if j.suspect[p.ID] {
				sus[m.ID] = true
				break
			}
		}
	}
	return func(m *weir.Message) bool { return sus[m.ID] }
}

// destinations computes, before an epoch commits its outputs, the
// receiving partition of each output for every computation reading its
// stream (index-aligned with outs). An output lacking a column its
// receiver groups by fails the epoch, naming the output, the computation
// and the column: the user code must be fixed, and nothing is committed.
func (j *Job) destinations(outs []*weir.Message) ([][]transport.PartitionID, error) {
	dests := make([][]transport.PartitionID, len(outs))
	for i, m := range outs {
		routes := j.routes[m.Stream]
		if len(routes) == 0 {
			continue
		}
		d := make([]transport.PartitionID, len(routes))
		for ri, r := range routes {
			k, err := r.KeyOf(m.Payload)
			if err != nil {
				return nil, fmt.Errorf("computation %s: output %s on stream %s cannot be routed to %s: %w", j.comp.Name, m.ID, m.Stream, r.Name, err)
			}
			d[ri] = KeyedPartitionID(r.Name, PartitionIndex(k.Hash, r.Partitions))
		}
		dests[i] = d
	}
	return dests, nil
}

// distribute offers outputs to the downstream partitions dests names
// (from destinations); maybeDup says which may have been delivered before.
func (j *Job) distribute(outs []*weir.Message, dests [][]transport.PartitionID, maybeDup func(*weir.Message) bool) {
	for i, m := range outs {
		if len(dests[i]) == 0 {
			continue
		}
		dup := maybeDup(m)
		size := messageSize(m) // once per output, not per destination or retry
		for _, dest := range dests[i] {
			j.offer(pendingOffer{msg: m, size: size, dest: dest, ack: j.downstreamAck(m), maybeDup: dup})
		}
	}
}

func (j *Job) downstreamAck(m *weir.Message) transport.AckFunc {
	if j.comp.Swift() {
		return func(msgid.ID) { j.acks.push(func() { j.swift.delivered(m.ID) }) }
	}
	out := j.box.entries[m.ID]
	if out == nil {
		// Already delivered to every destination; nothing to track.
		return func(msgid.ID) {}
	}
	return func(msgid.ID) { j.acks.push(func() { j.box.ack(out) }) }
}

// offer hands o to its destination, or queues it behind the offers to the
// same destination that are still waiting for room.
func (j *Job) offer(o pendingOffer) {
	if j.waiting[o.dest] == 0 && j.cfg.Hub.Offer(j.sender, o.dest, o.msg, o.size, o.ack, o.maybeDup) {
		return
	}
	j.pending = append(j.pending, o)
	j.waiting[o.dest]++
}

// retryOffers re-offers waiting outputs in order; per destination it stops
// at the first refusal, so each destination receives them in emission order.
func (j *Job) retryOffers() {
	if len(j.pending) == 0 {
		return
	}
	blocked := map[transport.PartitionID]bool{}
	keep := j.pending[:0]
	for _, o := range j.pending {
		if blocked[o.dest] || !j.cfg.Hub.Offer(j.sender, o.dest, o.msg, o.size, o.ack, o.maybeDup) {
			blocked[o.dest] = true
			keep = append(keep, o)
			continue
		}
		j.waiting[o.dest]--
	}
	clear(keep[len(keep):len(j.pending)])
	j.pending = keep
}

// flushSwift acknowledges the Swift inputs whose outputs are all delivered:
// upstream for internal inputs, to the source reader for source records.
// It runs only after the epoch's commit, so an acknowledged input's effect on
// state is durable.
func (j *Job) flushSwift() {
	if j.swift == nil {
		return
	}
	done := j.swift.takeReady()
	if len(done) == 0 {
		return
	}
	if j.src != nil {
		j.src.markDone(done)
		return
	}
	j.recv.Ack(ids(done)...)
}

// report posts the job's status for the controller.
func (j *Job) report(idle bool) {
	s := Status{
		Partition:   j.cfg.Partition.ID,
		Computation: j.comp.Name,
		Job:         j.cfg.JobID,
		Epoch:       j.lastTS,
		At:          j.st.Now(),
		SystemWM:    map[string]store.Timestamp{},
	}
	ctl := j.cfg.Board.Control(j.comp.Name)
	s.UpstreamDoneSeen = ctl.UpstreamDone
	s.AppliedInputWM = make(map[string]store.Timestamp, len(j.inputs.watermarks))
	for k, v := range j.inputs.watermarks {
		s.AppliedInputWM[k] = v
	}
	var mins map[string]store.Timestamp
	if j.swift != nil {
		mins = j.swift.minSystemTimestamp()
	} else {
		mins = j.box.minSystemTimestamp()
	}
	for _, stream := range j.comp.Outputs {
		// Future outputs of a Transform carry a later epoch timestamp; a Swift
		// output inherits its parent's, bounded by the input watermark (or, at
		// a source, by the next record's write time).
		bound := j.lastTS
		if j.comp.Swift() {
			bound = j.swiftBound()
		}
		if m, ok := mins[stream]; ok && m < bound {
			bound = m
		}
		s.SystemWM[stream] = bound
	}
	if j.src != nil {
		s.EventWM, s.EventIdle = j.src.eventWatermark(j.st.Now())
	} else {
		s.EventWM = j.eventWM
	}
	undelivered, _ := j.box.undelivered()
	// Delivered outputs whose erase is not yet committed count as in
	// flight: a pipeline reported stopped must not send them again.
	quiet := undelivered == 0 && len(j.pending) == 0 && len(j.box.erase) == 0
	if j.swift != nil {
		quiet = quiet && j.swift.count() == 0
	}
	if j.src != nil {
		quiet = quiet && len(j.src.inflight) == 0
	} else {
		quiet = quiet && j.recv.Pending() == 0
	}
	s.Quiet, s.DrainingSeen = quiet, ctl.Draining
	drained := quiet && j.timers.count() == 0
	if j.src != nil {
		drained = drained && j.src.finished()
	} else {
		drained = drained && ctl.UpstreamDone
	}
	s.Drained = drained
	for _, sk := range j.sinks {
		if f, ok := sk.sink.(interface{ Failure() error }); ok {
			if err := f.Failure(); err != nil {
				if s.SinkFailures == nil {
					s.SinkFailures = map[string]string{}
				}
				s.SinkFailures[sk.plan.ID] = err.Error()
			}
		}
	}
	j.cfg.Board.Post(s)
}

// swiftBound is a lower bound of the SystemTimestamp of any future output of
// a Swift job: outputs inherit their parents', and every future input has a
// SystemTimestamp at or above the input watermark.
func (j *Job) swiftBound() store.Timestamp {
	if j.src != nil {
		return j.src.nextSystemTimestamp()
	}
	var wm store.Timestamp
	first := true
	for _, s := range j.comp.Inputs {
		w := j.inputs.watermarks[s]
		if first || w < wm {
			wm, first = w, false
		}
	}
	return wm
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
// waits for new input, room in a downstream buffer, or the empty-batch
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
		var notify <-chan struct{}
		if j.recv != nil {
			notify = j.recv.Notify()
		}
		var room <-chan struct{}
		if len(j.pending) > 0 {
			room = j.cfg.Hub.Ready(j.pending[0].dest)
		}
		t := time.NewTimer(j.comp.Batch.EmptyBackoff)
		select {
		case <-ctx.Done():
		case <-notify:
		case <-room:
		case <-t.C:
		}
		t.Stop()
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

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
