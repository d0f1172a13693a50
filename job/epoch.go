package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

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
	// DeadLettered counts the inputs sent to the dead-letter stream.
	DeadLettered int
}

// Decision is what an epoch decided, before anything leaves the job: the
// transaction to commit, the acknowledgements to send, the outputs to
// offer. Decide builds it; Apply carries it out in Flow's order (§3.2 of
// flow-internals): duplicates are acknowledged at once, the transaction
// commits with the lease as prerequisite, and only then do offsets get
// reported, sinks start their sends, outputs go downstream and inputs are
// acknowledged upstream. A crash point is a stop between two steps of
// Apply, so a test (or a seeded simulation) that stops there sees exactly
// the effects of the steps before it.
//
// Deciding changes the job's own memory (its dedup watermarks, outbox,
// timers, state cache, Swift lineage) but nothing outside it; a job whose
// Apply fails is discarded, so that memory is never used again.
type Decision struct {
	// Idle: there was no work. Probe: an idle job's lease probe is due.
	Idle, Probe bool
	// TS is the epoch's unique timestamp (zero for an idle epoch without
	// a probe).
	TS store.Timestamp
	// Duplicates are inputs already processed: acknowledged at once.
	Duplicates []*weir.Message
	// Fresh are the inputs the epoch processed: acknowledged upstream after
	// the commit (a Swift job acknowledges them later, when every output
	// derived from them is delivered).
	Fresh []*weir.Message
	// Outputs and their receiving partitions (index-aligned), offered after
	// the commit; suspect says which may have been delivered before.
	Outputs []*weir.Message
	Dests   [][]transport.PartitionID
	suspect func(*weir.Message) bool
	// tokens are the outputs' *output or *swiftChild (index-aligned), the
	// offers' tokens; origins their Origin (index-aligned, nil: none).
	tokens  []any
	origins []transport.PartitionID
	// Txn holds the epoch's writes; Commit says whether it is committed (a
	// Swift epoch with nothing to persist and no probe due commits nothing).
	Txn    *store.Txn
	Commit bool

	srcBatch *sourceBatch
	result   EpochResult
	dropped  dropReasons
}

// Epoch runs one iteration: Decide, then Apply.
func (j *Job) Epoch(ctx context.Context) (EpochResult, error) {
	d, err := j.Decide(ctx)
	if err != nil {
		return EpochResult{}, err
	}
	return j.Apply(ctx, d)
}

// Decide runs the deciding half of an epoch, in Flow's order: apply the
// controller's watermarks; check output limits (backpressure); fetch inputs,
// due timers and a source batch; take the epoch timestamp; deduplicate;
// run user code grouped by key (timers first); register dedup ids, outputs
// and timers; and build the transaction (source position, dedup ids,
// outbox, timers, sink writes and state, user state).
func (j *Job) Decide(ctx context.Context) (*Decision, error) {
	if j.closed {
		return nil, errors.New("job: epoch on a closed job")
	}
	j.decideStart = time.Now() // for the status's EpochStats
	j.epochCount++
	d := &Decision{}
	ctl := j.takeControl()
	blocked := j.backpressure(ctl)
	msgs, fired, err := j.fetch(ctx, d, ctl, blocked)
	if err != nil {
		return nil, err
	}
	if !j.hasWork(d, msgs, fired) {
		return j.idle(ctx, d)
	}
	// 4. The epoch's unique timestamp (sequence number).
	if d.TS, err = j.st.Timestamp(ctx); err != nil {
		return nil, err
	}
	if d.srcBatch != nil {
		msgs = j.src.messages(d.srcBatch, d.TS)
	}
	d.result.Fetched = len(msgs)
	if err := j.dedup(ctx, d, msgs); err != nil {
		return nil, err
	}
	// 6. User code, grouped by key: timers, then messages.
	dl := j.deadLettered
	emits, err := j.process(ctx, d.TS, d.Fresh, fired)
	if err != nil {
		return nil, err
	}
	d.result.DeadLettered = int(j.deadLettered - dl)
	txn := j.newTxn()
	if err := j.record(d, txn, emits); err != nil {
		return nil, err
	}
	if err := j.prepare(ctx, txn); err != nil {
		return nil, err
	}
	// Epochs vary in size: the hint follows a large one at once and
	// decays slowly after it.
	j.txnHint = max(txn.Len(), j.txnHint-j.txnHint/8)
	d.Txn = txn
	d.Commit = !j.comp.Swift() || !txn.Empty() || j.tx.probeDue()
	return d, nil
}

// takeControl is Decide's step 1: the controller's watermarks and draining
// flag, acknowledgements that arrived, and (at a source) the source records
// their delivered Swift outputs release.
func (j *Job) takeControl() board.Control {
	ctl := j.cfg.Board.Control(j.comp.Name)
	for s, wm := range ctl.InputSystemWM {
		j.inputs.advance(s, wm)
	}
	if ctl.EventWM.After(j.eventWM) {
		j.eventWM = ctl.EventWM
	}
	j.drainAcks()
	if j.src != nil {
		// Delivered Swift outputs release their source records now, before
		// the work decision, so that the position they let advance is
		// committed by this epoch (every record released was committed by an
		// earlier one). Memory only: an internal input's upstream ack waits
		// for Apply.
		j.flushSwift()
	}
	return ctl
}

// backpressure is step 2: a full outbox (or too many Swift outputs in
// flight) blocks input, and sinks are told. So does a receiving
// partition's full buffer (Flow's "output buffer is full") that still
// refuses outputs offered again here: what the job would read meanwhile
// could only wait in its memory, decoded, behind the refused outputs.
// Sinks are not told of a full buffer: nothing they hold back frees it.
// The graph is acyclic (spec), so a full buffer always drains.
func (j *Job) backpressure(ctl board.Control) bool {
	n, bytes := j.box.undelivered()
	if j.swift != nil {
		n += j.swift.count()
		bytes += j.swift.heldBytes()
	}
	full := n >= j.comp.OutputStoreCountLimit || bytes >= j.comp.OutputStoreBytesLimit
	j.tellSinks(ctl, full)
	j.retryOffers()
	return full || len(j.offers.blocked) > 0
}

// fetch is step 3: a source batch (into d), buffered inputs and due timers,
// unless blocked (or, for the source and timers, draining); nothing while
// the computation is quiesced for a rescale (board.Control.Quiesce).
func (j *Job) fetch(ctx context.Context, d *Decision, ctl board.Control, blocked bool) (msgs []*weir.Message, fired []*timerEntry, err error) {
	clear(j.suspect)
	j.origins = j.origins[:0]
	if j.src != nil {
		j.src.readToEnd = false
	}
	j.quiesced = ctl.Quiesce
	if ctl.Quiesce {
		return nil, nil, nil
	}
	if !blocked && !ctl.Draining && j.src != nil {
		if d.srcBatch, err = j.src.read(ctx, j.comp.Batch.MaxRows, j.comp.Batch.MaxBytes); err != nil {
			return nil, nil, err
		}
	}
	if !blocked && j.recv != nil {
		if msgs, err = j.fetchInputs(); err != nil {
			return nil, nil, err
		}
	}
	if len(j.comp.Timers) > 0 && !ctl.Draining && !blocked {
		fired = j.timers.due(j.eventWM, j.st.Now(), j.comp.Batch.MaxRows)
	}
	return msgs, fired, nil
}

// hasWork reports whether the epoch has anything to do: inputs, timers, a
// source batch, outbox rows to erase, a source position or sink work to
// commit.
func (j *Job) hasWork(d *Decision, msgs []*weir.Message, fired []*timerEntry) bool {
	srcDirty := j.src != nil && j.src.dirty()
	return len(msgs) > 0 || len(fired) > 0 || (d.srcBatch != nil && len(d.srcBatch.records) > 0) ||
		len(j.box.erase) > 0 || srcDirty || j.sinksPending()
}

// idle decides an epoch with no work. An idle job still commits a nearly
// empty transaction once per lease_check_period, to learn that its lease
// is gone.
func (j *Job) idle(ctx context.Context, d *Decision) (*Decision, error) {
	d.Idle, d.result.Idle = true, true
	if j.tx.probeDue() {
		var err error
		if d.TS, err = j.st.Timestamp(ctx); err != nil {
			return nil, err
		}
		d.Probe, d.Commit, d.Txn = true, true, store.NewTxn(j.cfg.Lease)
	}
	return d, nil
}

// dedup is step 5: inputs found already processed are acknowledged at once
// (in Apply's first step); the rest are d.Fresh.
func (j *Job) dedup(ctx context.Context, d *Decision, msgs []*weir.Message) error {
	origins := j.origins
	if d.srcBatch != nil {
		origins = nil
	}
	var err error
	if d.Fresh, d.Duplicates, err = j.inputs.filter(ctx, msgs, origins, j.suspect); err != nil {
		return err
	}
	d.result.Inputs, d.result.Duplicates = len(d.Fresh), len(d.Duplicates)
	// A source's records are never dropped here (its position is its
	// dedup): a Swift source's tracker holds every record it read.
	invariants.Check(d.srcBatch == nil || len(d.Duplicates) == 0, "source %s: %d records dropped as duplicates", j.cfg.Partition.ID, len(d.Duplicates))
	d.dropped = j.inputs.why
	return nil
}

// record is steps 7–9: the inputs' dedup ids, the outputs (ids, receiving
// partitions, Swift lineage, sinks) and the timers go into txn and d.
func (j *Job) record(d *Decision, txn *store.Txn, emits []emitted) error {
	j.inputs.register(txn)
	outs, lineage, err := j.materialize(d.TS, emits)
	if err != nil {
		return err
	}
	if (j.src != nil && j.comp.Swift()) || j.tagsOrigins() {
		sortByID(outs, lineage)
	}
	d.origins = j.outputOrigins(outs, lineage)
	if d.Dests, err = j.destinations(outs); err != nil {
		return err
	}
	d.Outputs, d.result.Outputs = outs, len(outs)
	d.suspect = j.outputSuspect(outs, lineage)
	d.tokens = make([]any, len(outs))
	if j.swift != nil {
		children := j.swift.track(d.Fresh, outs, lineage)
		for i, m := range outs {
			c := &children[i]
			j.swift.expect(c, len(j.routes[m.Stream])+len(j.sinksOf[m.Stream]))
			d.tokens[i] = c
		}
	} else {
		for i, m := range outs {
			if inline, err := j.deliverInline(m); err != nil {
				return err
			} else if inline {
				continue // no token: it has no receiving partition
			}
			d.tokens[i] = j.register(m, false)
		}
	}
	j.timers.sync(txn)
	return nil
}

// prepare is step 10: the source position, the outbox, sink writes,
// states and external state writes go into txn.
func (j *Job) prepare(ctx context.Context, txn *store.Txn) error {
	j.drainAcks()
	if j.src != nil {
		if err := j.src.sync(txn); err != nil {
			return err
		}
	}
	if err := j.box.sync(txn); err != nil {
		return err
	}
	for _, s := range j.sinks {
		if err := s.sink.Sync(ctx, txn); err != nil {
			return fmt.Errorf("job %s: sink %s: %w", j.cfg.Partition.ID, s.plan.ID, err)
		}
	}
	if err := j.states.sync(txn); err != nil {
		return err
	}
	j.ext.sync(txn)
	return nil
}

// Apply carries out a Decision in Flow's order, stopping at the first
// failure (the job is then discarded) or crash point:
//
//	acknowledge duplicates upstream (offers refused earlier were retried
//	by Decide's backpressure step)
//	· before-commit ·
//	commit (lease-fenced, guarded by partition_transactions)
//	· after-commit-before-ack ·
//	report source offsets; sinks' post-commit sends; offer outputs;
//	report status; acknowledge inputs upstream (Swift: those whose outputs
//	are all delivered)
//	· after-ack-before-erase ·
//	report status
func (j *Job) Apply(ctx context.Context, d *Decision) (EpochResult, error) {
	res := d.result
	if d.Idle {
		if d.Probe {
			if err := j.tx.commit(ctx, d.Txn, d.TS); err != nil {
				return res, fmt.Errorf("job %s: lease probe: %w", j.cfg.Partition.ID, err)
			}
			j.lastTS = d.TS
			res.Committed = true
		}
		j.flushSwift()
		j.report(true)
		return res, nil
	}
	if len(d.Duplicates) > 0 && j.recv != nil {
		j.recv.Ack(ids(d.Duplicates)...)
	}
	if err := j.crash(CrashBeforeCommit); err != nil {
		return res, err
	}
	var commitTook time.Duration
	if d.Commit {
		t0 := time.Now()
		if err := j.tx.commit(ctx, d.Txn, d.TS); err != nil {
			j.ext.commitFailed(err)
			return res, fmt.Errorf("job %s: commit: %w", j.cfg.Partition.ID, err)
		}
		commitTook = time.Since(t0)
		res.Committed = true
	}
	j.recordEpoch(d, res, commitTook)
	j.keepTxn(d.Txn)
	j.lastTS = d.TS
	if j.comp.Mode == plan.ExactlyOnce && !j.comp.Swift() && j.recv != nil {
		applied.record(j.st, string(j.cfg.Partition.ID), d.Fresh, j.inputs.watermarks)
	}
	j.box.committed()
	j.timers.committed()
	j.states.committed()
	j.ext.committed()
	if err := j.crash(CrashAfterCommitBeforeAck); err != nil {
		return res, err
	}

	// Post-commit effects.
	if j.src != nil {
		j.src.committed(ctx)
	}
	for _, s := range j.sinks {
		s.sink.Commit(ctx)
	}
	j.distribute(d.Outputs, d.Dests, d.tokens, d.origins, d.suspect)
	if len(d.Fresh) > 0 {
		// Report before acknowledging the inputs upstream: once an upstream
		// partition learns its outputs were processed it may report quiet,
		// and the controller must not pair that with this partition's report
		// from before the epoch, which lacks the outputs just made (a drain
		// would look finished while they are in flight).
		j.report(false)
	}
	if j.recv != nil && !j.comp.Swift() {
		j.recv.Ack(ids(d.Fresh)...)
	}
	j.drainAcks()
	j.flushSwift()
	j.cfg.Board.AddCounters(j.comp.Name, epochCounters(res))
	if err := j.crash(CrashAfterAckBeforeErase); err != nil {
		return res, err
	}
	j.report(false)
	return res, nil
}

// maxSpareMutations bounds the transaction a job keeps for its next epoch
// (keepTxn): about 1.5 MB of mutation list; a larger epoch's is left to
// the collector.
const maxSpareMutations = 16 << 10

// newTxn returns the epoch's transaction: the previous epoch's, recycled,
// or a new one sized for the recent epochs (txnHint). Rebuilding the
// mutation list every epoch was ~270 of the ~2,600 bytes the exactly_once
// row allocated per message (weir bench's alloc B/msg).
func (j *Job) newTxn() *store.Txn {
	txn := j.spareTxn
	j.spareTxn = nil
	if txn == nil {
		txn = store.NewTxn(j.cfg.Lease)
	} else {
		txn.Recycle(j.cfg.Lease)
	}
	txn.Grow(j.txnHint)
	return txn
}

// keepTxn keeps an applied epoch's transaction for the next one (newTxn):
// the store is done with it once Commit returned.
func (j *Job) keepTxn(txn *store.Txn) {
	if txn != nil && txn.Cap() <= maxSpareMutations {
		j.spareTxn = txn
	}
}

// epochCounters are an epoch's counts.
func epochCounters(res EpochResult) board.Counters {
	return board.Counters{Epochs: 1, Commits: b2u(res.Committed),
		Inputs: uint64(res.Inputs), Duplicates: uint64(res.Duplicates), Outputs: uint64(res.Outputs),
		DeadLettered: uint64(res.DeadLettered)}
}

// recordEpoch keeps an applied epoch's figures for the job's status
// (board.Status.Totals and LastEpoch: the web console's per-partition
// rates and epoch history). Nothing decides on them.
func (j *Job) recordEpoch(d *Decision, res EpochResult, commit time.Duration) {
	j.totals.Add(epochCounters(res))
	e := &board.EpochStats{TS: d.TS, At: time.Now(), Inputs: res.Inputs, Duplicates: res.Duplicates, Outputs: res.Outputs,
		Duration: time.Since(j.decideStart), Commit: commit, Committed: res.Committed}
	if res.Committed && d.Txn != nil {
		e.Writes, e.Bytes = d.Txn.Len(), d.Txn.Bytes()
	}
	j.lastEpoch = e
}

// String summarises the decision for traces and protocol scripts: the
// epoch timestamp, the inputs taken and dropped, the outputs and where
// they go, and the transaction's writes per table.
func (d *Decision) String() string {
	if d.Idle {
		if d.Probe {
			return "idle; lease probe"
		}
		return "idle"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ts=%016x", uint64(d.TS))
	if len(d.Fresh) > 0 {
		fmt.Fprintf(&b, " inputs=%s", idList(d.Fresh))
	}
	if len(d.Duplicates) > 0 {
		fmt.Fprintf(&b, " duplicates=%s (%s)", idList(d.Duplicates), d.dropped)
	}
	for i, m := range d.Outputs {
		fmt.Fprintf(&b, "\n  out %s %s", m.ID, m.Stream)
		if len(d.Dests[i]) > 0 {
			fmt.Fprintf(&b, " → %v", d.Dests[i])
		}
	}
	if d.Commit {
		fmt.Fprintf(&b, "\n  commit (lease-fenced) %s", txnSummary(d.Txn))
	} else {
		b.WriteString("\n  no commit")
	}
	return b.String()
}

func idList(msgs []*weir.Message) string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = string(m.ID)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// txnSummary counts a transaction's writes per table and kind.
func txnSummary(txn *store.Txn) string {
	counts := map[string]int{}
	for _, m := range txn.Mutations() {
		kind := map[store.MutationKind]string{store.Put: "put", store.Delete: "del", store.DeleteRange: "delrange", store.Append: "append"}[m.Kind]
		counts[string(m.Table)+" "+kind]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"partition_transactions row"}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func ids(msgs []*weir.Message) []msgid.ID {
	out := make([]msgid.ID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}
