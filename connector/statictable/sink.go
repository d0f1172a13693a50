package statictable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// SinkClassName is ArrivalOrderTableSink's sink_class_name.
const SinkClassName = "ArrivalOrderTableSink"

// ErrProgressLost: the output directory's progress manifest is missing or
// behind what the pipeline recorded as published (it was deleted,
// replaced or restored from an old copy). The sink stops rather than write
// tables that may duplicate or skip rows.
var ErrProgressLost = errors.New("progress manifest lost or rolled back")

// ErrNotOwner: the output directory belongs to another sink or pipeline.
var ErrNotOwner = errors.New("output directory belongs to another sink")

// errRowRefused: an output row does not fit the table being written (a
// value its declared column cannot hold, an undeclared column, a column
// with two types in one table). The sink's error adds rowRefusedHint.
var errRowRefused = errors.New("output row refused")

// rowRefusedHint says what a refused row means and what to do: the output
// is committed in its computation's outbox or in the sink's spool,
// whatever input it came from, so every restart hands it to the sink
// again.
const rowRefusedHint = "the output is committed (in its computation's outbox or the sink's spool) and is handed to the sink again after every restart, so the pipeline stops here " +
	"until the sink accepts it: change the sink's columns (or the computation that emits it) and run again; 'weir statictable skip' skips input tables, not outputs already made"

// pending is one message of the sink's input stream and its delivery
// callback.
type pending struct {
	msg    *weir.Message
	done   func(error)
	weight int
}

// rowSource hands a table's rows to yield, in order, and stops at the
// first error (which it returns). A published table's rows come from the
// spool as they are read, so that a table is never all in memory.
type rowSource func(yield func(p *pending) error) error

// rowsOf is the rowSource of rows.
func rowsOf(rows []*pending) rowSource {
	return func(yield func(*pending) error) error {
		for _, p := range rows {
			if err := yield(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// openSlot is the table being filled: its rows for slot, in arrival
// order, are in the spool (spool.go) and in Sink.unstored.
type openSlot struct {
	slot        time.Time
	rows        int64
	weight      int64
	lastArrival time.Time
}

// Sink is ArrivalOrderTableSink, one instance per partition of the
// writing computation. The package documentation describes the protocol;
// in short, per message:
//
//	Distribute → open table (unstored), acknowledged at once → spooled in
//	  the same epoch's Sync (the acknowledgement counts only if that epoch
//	  commits, so the outbox never writes it);
//	or, if it would close the open table (and every later message of the
//	  epoch): Distribute → registered → (epoch commit) Commit → publish,
//	  open table (unstored) → spooled in the next epoch's Sync →
//	  acknowledged at its Commit;
//	open table → published (table file + manifest frontier, one atomic
//	  step) → the frontier recorded in the next epoch's Sync.
//
// Messages at or below the partition's frontier in the manifest were
// published by an earlier life, and those at or below the spool's last id
// are in the spool: they skip the tables and are acknowledged the same
// way.
type Sink struct {
	id, path string
	p        *SinkParams
	codec    compress.Codec
	dir      Dir
	logf     func(format string, args ...any)
	newDir   func(string) (Dir, error)

	sc    connector.SinkContext
	now   func() time.Time
	part  string
	tag   string
	owner string

	// base is the partition's frontier in the manifest, as this instance
	// last saw it; recordedID the frontier the pipeline's store records.
	base       frontier
	recordedID msgid.ID
	lastID     msgid.ID
	// arrival is the clock read once per epoch for the rows Distribute adds
	// to the open table (zero until the epoch's first; Sync resets it): a
	// table's last arrival needs no per-row precision.
	arrival time.Time

	registered []*pending
	open       *openSlot
	// unstored: the open table's rows added since the last Sync, which
	// spools them; stored: spooled (or found in the spool), to be
	// acknowledged after the epoch commit.
	unstored []*pending
	stored   []*pending
	// spoolHigh is the last id in the spool (committed, or in the epoch
	// transaction being built); spoolDrop, if set, the last id of the
	// spooled rows that are published, which the next Sync deletes.
	spool                []byte // the spool's key prefix
	spoolHigh, spoolDrop msgid.ID
	// toRecord is the frontier of the last publish, which the next Sync
	// records as the pipeline's (recordedID).
	toRecord msgid.ID
	// spoolState: the pipeline's record of the sink is version 2 (set at
	// the first Sync that spools), which an older weir refuses.
	spoolState bool
	published  []*pending
	recorded   []*pending
	// queued counts the open table's rows (Queued).
	queued     atomic.Int64
	nextExpiry time.Time
	// flush: the computation's input is finished, a drain is in progress
	// or its outbox is full (Progress): the open table is published at the
	// next Commit instead of waiting for its slot to end.
	flush bool

	mu      sync.Mutex
	failure error

	mRows, mReplayed, mData, mEmpty, mBytes, mExpired, mConflicts prometheus.Counter
	mPublish                                                      prometheus.Observer
}

var _ connector.ProgressObserver = (*Sink)(nil)

// NewSink builds an ArrivalOrderTableSink instance from its spec
// parameters. It does not touch the directory: Init does.
func NewSink(sp connector.SinkParams, o Options) (*Sink, error) {
	p, err := ParseSinkParams(sp.Path+".parameters", sp.Parameters)
	if err != nil {
		return nil, err
	}
	if sp.AtMostOnce != nil {
		return nil, fmt.Errorf("%s.at_most_once_strategy: ArrivalOrderTableSink is exactly-once only", sp.Path)
	}
	c, _ := parquetCodec(p.Compression)
	m := metrics()
	s := &Sink{id: sp.SinkID, path: sp.Path, p: p, codec: c, logf: o.logf(), newDir: OpenLocalDir,
		mRows:      m.sinkRows.WithLabelValues(sp.SinkID),
		mReplayed:  m.sinkReplayed.WithLabelValues(sp.SinkID),
		mData:      m.sinkTables.WithLabelValues(sp.SinkID, "data"),
		mEmpty:     m.sinkTables.WithLabelValues(sp.SinkID, "empty"),
		mBytes:     m.sinkBytes.WithLabelValues(sp.SinkID),
		mExpired:   m.sinkExpire.WithLabelValues(sp.SinkID),
		mConflicts: m.sinkConflicts.WithLabelValues(sp.SinkID),
		mPublish:   m.sinkPublish.WithLabelValues(sp.SinkID),
	}
	return s, nil
}

// Init opens the output directory, checks that it belongs to this sink
// and that its manifest is not behind the pipeline's record, removes what
// crashed publishes left (unlisted tables, this partition's temporary
// files) and expired tables, and takes the partition's frontier.
func (s *Sink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.sc, s.part = sc, sc.PartitionID
	s.spool = spoolPrefix(s.path, s.part)
	s.now = sc.Store.Now
	h := fnv.New32a()
	h.Write([]byte(s.part))
	s.tag = fmt.Sprintf("%s-%08x", sanitize(s.part), h.Sum32())
	b, err := sc.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("%s: load state: %w", s.path, err)
	}
	if b != nil {
		var v byte
		if s.recordedID, v, err = decodeSinkState(b); err != nil {
			return fmt.Errorf("%s: state: %w", s.path, err)
		}
		s.spoolState = v == sinkStateVersion
	}
	if s.owner, err = sinkOwner(ctx, sc.Store, s.path); err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	if s.dir, err = s.newDir(s.p.OutputDirectory); err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	unlock, err := s.dir.Lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	defer unlock()
	m, err := s.loadManifest(true)
	if err != nil {
		return err
	}
	s.base = m.Frontiers[s.part]
	if s.base.MessageID < s.recordedID {
		return fmt.Errorf("%s: output directory %s: %w: its frontier for partition %s is %q, the pipeline recorded %q as published", s.path, s.dir.Path(), ErrProgressLost, s.part, s.base.MessageID, s.recordedID)
	}
	if err := s.loadSpool(ctx); err != nil {
		return err
	}
	s.setQueued()
	s.lastID = max(s.base.MessageID, s.spoolHigh)
	if err := s.sweep(m); err != nil {
		return err
	}
	gone := m.expire(s.now())
	if len(gone) > 0 || m.Version == 0 {
		m.Version = manifestVersion
		if err := s.dir.WriteManifest(m.encode()); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
	}
	s.removeExpired(gone)
	s.nextExpiry = m.nextExpiry()
	return nil
}

// loadManifest reads the manifest under the lock and checks its owner. At
// Init a missing manifest is created (Version 0 until written) if the
// pipeline recorded nothing and the directory holds no tables.
func (s *Sink) loadManifest(atInit bool) (*manifest, error) {
	b, ok, err := s.dir.ReadManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	where := fmt.Sprintf("%s: output directory %s", s.path, s.dir.Path())
	if !ok {
		if !atInit || s.recordedID != "" {
			return nil, fmt.Errorf("%s: %w: %s is missing, but the pipeline recorded tables of partition %s as published", where, ErrProgressLost, manifestName, s.part)
		}
		names, err := s.dir.List()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, err)
		}
		for _, n := range names {
			if tableNameRE.MatchString(n) {
				return nil, fmt.Errorf("%s: %w: it holds table %s but no %s; use an empty directory", where, ErrNotOwner, n, manifestName)
			}
		}
		return &manifest{Owner: s.owner, Sink: s.path, Frontiers: map[string]frontier{}}, nil
	}
	m, err := decodeManifest(s.dir.Path()+"/"+manifestName, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	if m.Owner != s.owner {
		return nil, fmt.Errorf("%s: %w: manifest owner %s (sink %s), this pipeline's sink is %s (%s)", where, ErrNotOwner, m.Owner, m.Sink, s.owner, s.path)
	}
	return m, nil
}

// sweep removes table files the manifest does not list (left by a publish
// that crashed between renaming the table and writing the manifest: under
// the lock no publish is in flight) and this partition's temporary files.
// REQUIRES: the lock.
func (s *Sink) sweep(m *manifest) error {
	names, err := s.dir.List()
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	listed := m.listed()
	mine := tempPrefix + s.tag + "-"
	for _, n := range names {
		if (tableNameRE.MatchString(n) && !listed[n]) || strings.HasPrefix(n, mine) {
			if err := s.dir.Remove(n); err != nil {
				return fmt.Errorf("%s: %w", s.path, err)
			}
			s.logf("%s: removed %s, left by an interrupted publish", s.path, n)
		}
	}
	return nil
}

func (s *Sink) removeExpired(names []string) {
	for _, n := range names {
		if err := s.dir.Remove(n); err != nil {
			// The manifest no longer lists it: a later sweep removes it.
			s.logf("%s: %v", s.path, err)
		}
		s.mExpired.Inc()
	}
}

// Distribute takes the next message of the input stream (id order).
// Messages the partition's frontier covers are already in a published
// table: they only wait for the next epoch commit to be acknowledged.
func (s *Sink) Distribute(m *weir.Message, done func(error)) {
	p := &pending{msg: m, done: done}
	if m.ID <= s.base.MessageID {
		s.published = append(s.published, p)
		s.mReplayed.Inc()
		return
	}
	if m.ID <= s.spoolHigh {
		s.stored = append(s.stored, p)
		return
	}
	if m.ID <= s.lastID {
		done(fmt.Errorf("%s: message id %s is not greater than the last distributed id %s", s.path, m.ID, s.lastID))
		return
	}
	s.lastID = m.ID
	if len(s.registered) == 0 && s.Failure() == nil && s.fits(p) {
		// It joins the open table now and is spooled by this epoch's Sync,
		// in this epoch's transaction: acknowledged like a sync sink's
		// output (the acknowledgement takes effect only if the epoch
		// commits), so the outbox never writes it. A row that would close
		// the open table waits for the commit (Commit), and every later
		// one of the epoch with it: publishing may take committed rows only,
		// and the spool above the frontier always holds the open table's
		// rows alone (Init rebuilds the open table from it).
		if s.arrival.IsZero() {
			s.arrival = s.now()
		}
		s.appendOpen(p, s.arrival)
		done(nil)
		p.done = acknowledged
		return
	}
	s.registered = append(s.registered, p)
}

// acknowledged is the done of a pending message acknowledged already.
func acknowledged(error) {}

// Sync writes, in the epoch transaction, the open table's new rows to the
// spool, deletes the spooled rows published since, and records the
// frontier of the last publish; the messages spooled or published since
// the last Sync are acknowledged after the commit. It returns the error
// that stopped publishing, if any: the epoch fails and the job restarts
// from the committed state.
func (s *Sink) Sync(_ context.Context, txn *store.Txn) error {
	s.arrival = time.Time{}
	if err := s.Failure(); err != nil {
		return err
	}
	if err := s.appendSpoolRows(txn, s.unstored); err != nil {
		return err
	}
	if len(s.unstored) > 0 {
		s.spoolHigh = s.unstored[len(s.unstored)-1].msg.ID
	}
	s.stored = append(s.stored, s.unstored...)
	s.unstored = nil
	if s.spoolDrop != "" {
		txn.DeleteRange(catalogTable, s.spool, s.spoolThrough(s.spoolDrop))
		s.spoolDrop = ""
	}
	if s.toRecord > s.recordedID || (s.spoolHigh != "" && !s.spoolState) {
		s.recordedID = max(s.recordedID, s.toRecord)
		s.sc.SaveState(txn, encodeSinkState(s.recordedID))
		s.spoolState = true
	}
	s.recorded = append(append(s.recorded, s.published...), s.stored...)
	s.published, s.stored = nil, nil
	return nil
}

// Commit runs after the epoch committed: it acknowledges what that commit
// recorded, adds the epoch's messages to the open table — publishing
// tables as slots end or fill up — and removes expired tables.
func (s *Sink) Commit(ctx context.Context) {
	for _, p := range s.recorded {
		p.done(nil)
	}
	s.recorded = nil
	if s.Failure() != nil {
		return
	}
	now := s.now()
	for _, p := range s.registered {
		if err := s.add(ctx, p, now); err != nil {
			s.fail(err)
			return
		}
	}
	s.registered = nil
	if s.closeDue(now) || (s.flush && s.open != nil) {
		if err := s.publish(ctx, now); err != nil {
			s.fail(err)
			return
		}
	}
	if !s.nextExpiry.IsZero() && !now.Before(s.nextExpiry) {
		if err := s.expireNow(ctx, now); err != nil {
			s.fail(err)
		}
	}
}

func (s *Sink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		s.logf("%v (the epoch fails; the job restarts from its committed state)", err)
	}
}

// Failure returns the error that stopped the sink, if any.
func (s *Sink) Failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Progress (connector.ProgressObserver) learns whether the open table
// must be flushed: when no input will reach the computation again (a
// finite run completes only after its outputs are acknowledged, which for
// this sink is after their table is published), when the pipeline drains
// (a stop waits for the same), and when the computation's outbox is full
// (it takes no input until outputs leave it, and they leave only when
// published). A flushed table is an ordinary publish — temporary file,
// rename, manifest replace with the frontier — so its crash safety is the
// publish's; rows that arrive after it go into a new table, of the same
// slot if they belong to it (tables are numbered, so two tables of a slot
// have distinct names).
func (s *Sink) Progress(p connector.Progress) {
	s.flush = p.Final || p.Draining || p.Backpressure
}

// PendingSync asks for an epoch when the sink has progress to make
// without new input: messages to add, spool or record, spooled rows to
// delete, a frontier to record, a table whose slot ended or that must be
// flushed (Progress), tables to expire, or a failure to report.
func (s *Sink) PendingSync() bool {
	if len(s.registered) > 0 || len(s.published) > 0 || len(s.unstored) > 0 || len(s.stored) > 0 ||
		s.spoolDrop != "" || s.toRecord > s.recordedID || s.Failure() != nil || (s.flush && s.open != nil) {
		return true
	}
	now := s.now()
	return s.closeDue(now) || (!s.nextExpiry.IsZero() && !now.Before(s.nextExpiry))
}

// Queued (connector.Queueing) is the number of rows of the open table:
// acknowledged once spooled, but not yet in a published table. While it is
// above zero the partition is neither quiet nor drained, so a finite
// pipeline completes, and a drain ends, only after the table is published
// (Progress flushes it).
func (s *Sink) Queued() int { return int(s.queued.Load()) }

func (s *Sink) setQueued() {
	n := int64(0)
	if s.open != nil {
		n = s.open.rows
	}
	s.queued.Store(n)
}

// Close releases nothing: unacknowledged messages stay in the outbox, the
// open table's rows in the spool, and the next instance publishes them.
func (s *Sink) Close() error { return nil }

// slotOf is the start of the table_period slot holding ts.
func (s *Sink) slotOf(ts store.Timestamp) time.Time {
	sec := int64(s.p.TablePeriod.Std() / time.Second)
	u := ts.Time().Unix()
	return time.Unix(u-u%sec, 0).UTC()
}

// add appends p to the open table. A row of a later slot closes the open
// table (its slot ended: no earlier row can follow in this partition's id
// order); so does a full table (max_row_count, max_data_weight). A new
// table takes the row's slot, or the partition's last slot if the row is
// late: tables are written in arrival order.
func (s *Sink) add(ctx context.Context, p *pending, now time.Time) error {
	if !s.fits(p) {
		if err := s.publish(ctx, now); err != nil {
			return err
		}
	}
	s.appendOpen(p, now)
	return nil
}

// fits sets p's weight and reports whether p can join the open table
// without closing it (or opens the first one): add publishes nothing
// before appending it.
func (s *Sink) fits(p *pending) bool {
	p.weight = rowWeight(p.msg.Payload)
	t := s.open
	if t == nil {
		return true
	}
	full := t.rows >= s.p.MaxRowCount || t.weight+int64(p.weight) > s.p.MaxDataWeight
	return !s.slotOf(p.msg.SystemTimestamp).After(t.slot) && !full
}

// appendOpen appends p (weighed by fits) to the open table, opening one if
// there is none: its row is spooled at the next Sync.
func (s *Sink) appendOpen(p *pending, now time.Time) {
	if s.open == nil {
		s.open = &openSlot{slot: s.tableSlot(p.msg.SystemTimestamp)}
	}
	t := s.open
	s.unstored = append(s.unstored, p)
	t.rows++
	t.weight += int64(p.weight)
	t.lastArrival = now
	s.setQueued()
}

// tableSlot is the slot of a new table whose first row has SystemTimestamp
// ts: the row's, or the partition's last slot if the row is late (tables
// are written in arrival order).
func (s *Sink) tableSlot(ts store.Timestamp) time.Time {
	slot := s.slotOf(ts)
	if slot.Before(s.base.LastSlot) {
		slot = s.base.LastSlot
	}
	return slot
}

// closeDue: the open table's slot has ended by the wall clock and no row
// arrived for close_delay.
func (s *Sink) closeDue(now time.Time) bool {
	t := s.open
	return t != nil && !now.Before(t.slot.Add(s.p.TablePeriod.Std())) && now.Sub(t.lastArrival) >= s.p.CloseDelay.Std()
}

// uncovered splits rows into those the frontier covers and the rest.
func (s *Sink) uncovered(rows []*pending) (covered, rest []*pending) {
	for i, p := range rows {
		if p.msg.ID > s.base.MessageID {
			return rows[:i], rows[i:]
		}
	}
	return rows, nil
}

// emptySlots are the slots strictly between the partition's last slot and
// slot that may get an empty table (flow-internals §7.8): slot T with
// T ≤ now and input system watermark > T + table_period. The partition's
// rows arrive in id order and their system timestamps do not decrease, so
// a row of slot proves the watermark is at least slot ≥ T + table_period.
// Slots already expired at creation (T + table_ttl ≤ now) are skipped,
// which bounds their number by table_ttl / table_period.
func (s *Sink) emptySlots(slot, now time.Time) []time.Time {
	last := s.base.LastSlot
	if last.IsZero() {
		return nil
	}
	period := s.p.TablePeriod.Std()
	var out []time.Time
	first := last.Add(period)
	if floor := now.Add(-s.p.TableTTL.Std()); first.Before(floor) {
		first = s.slotOf(store.MakeTimestamp(floor)).Add(period)
	}
	for t := first; t.Before(slot) && !t.After(now); t = t.Add(period) {
		out = append(out, t)
	}
	return out
}

// preparedTable is a table written to a temporary file: rows rows, the
// first and last of which have ids first and last (last's
// SystemTimestamp lastTS).
type preparedTable struct {
	temp        TempFile
	slot        time.Time
	rows        int64
	first, last msgid.ID
	lastTS      store.Timestamp
	bytes       int64
}

// publish writes the open table and publishes it with its frontier in one
// atomic step:
//
//  1. write the rows the frontier does not cover to a temporary file and
//     sync it (with the tables of empty slots before it);
//  2. under the directory lock, read the manifest: if the partition's
//     frontier moved (a replaced job's zombie published), drop what it
//     now covers and start again — a partially covered table writes only
//     its uncovered tail;
//  3. rename the files to their table names;
//  4. replace the manifest: the tables listed, the frontier advanced,
//     expired tables dropped. This rename is the commit: a crash before
//     it leaves unlisted files (removed at the next Init), after it the
//     table and its progress.
//
// The table's rows are read back from the spool (those above the
// frontier), followed by the unstored ones. Once published, the unstored
// rows are acknowledged after the next epoch commit like the spooled ones
// before them, and that Sync deletes the spooled rows.
func (s *Sink) publish(ctx context.Context, now time.Time) error {
	t := s.open
	s.open = nil
	s.setQueued()
	start := time.Now()
	defer func() {
		// Whatever was published — by this instance or by another that
		// moved the frontier — leaves the spool and is acknowledged.
		s.published = append(s.published, s.unstored...)
		s.unstored = nil
		if s.spoolHigh != "" {
			s.spoolDrop = s.spoolHigh
		}
	}()
	for {
		_, unstored := s.uncovered(s.unstored)
		if s.spoolHigh <= s.base.MessageID && len(unstored) == 0 {
			s.mReplayed.Add(float64(len(s.unstored)))
			return nil
		}
		moved, err := s.publishOnce(ctx, t, s.tableRows(ctx, unstored), now)
		if err != nil {
			return err
		}
		if !moved {
			s.mReplayed.Add(float64(len(s.unstored) - len(unstored)))
			s.mPublish.Observe(time.Since(start).Seconds())
			return nil
		}
		s.mConflicts.Inc()
	}
}

// tableRows is the open table's rows above the frontier: the spooled
// ones, read from the spool as they are handed on, then unstored.
func (s *Sink) tableRows(ctx context.Context, unstored []*pending) rowSource {
	return func(yield func(*pending) error) error {
		if s.spoolHigh > s.base.MessageID {
			var yerr error
			// One row at a time: yield keeps nothing of the row but its
			// values (the writers copy them, or the payload's own strings).
			var msg weir.Message
			p := &pending{msg: &msg}
			err := s.scanSpool(ctx, s.base.MessageID, s.spoolHigh, true, func(r *spooledRow) bool {
				msg.ID, msg.SystemTimestamp, msg.Payload, p.weight = r.id, r.ts, r.payload, r.weight
				yerr = yield(p)
				return yerr == nil
			})
			if yerr != nil {
				return yerr
			}
			if err != nil {
				return err
			}
		}
		return rowsOf(unstored)(yield)
	}
}

// publishOnce runs the publish steps once; moved reports that the
// frontier had moved and nothing was published.
func (s *Sink) publishOnce(ctx context.Context, t *openSlot, rows rowSource, now time.Time) (moved bool, err error) {
	cols := s.p.Columns
	if s.p.format == Parquet {
		if len(cols) == 0 {
			if cols, err = inferColumns(rows); err != nil { // a first pass
				return false, fmt.Errorf("%s: output directory %s: %w; %s", s.path, s.dir.Path(), err, rowRefusedHint)
			}
		} else {
			cols = sortedColumns(cols)
		}
	}
	// The tables of empty slots come before the data table: names follow
	// slot order.
	var tables []*preparedTable
	defer func() {
		for _, pt := range tables {
			if pt.temp != nil {
				pt.temp.Abort()
			}
		}
	}()
	for _, slot := range s.emptySlots(t.slot, now) {
		e, err := s.prepare(slot, rowsOf(nil), cols)
		if err != nil {
			return false, err
		}
		tables = append(tables, e)
	}
	data, err := s.prepare(t.slot, rows, cols)
	if err != nil {
		return false, err
	}
	tables = append(tables, data)
	crashAt(CrashTempComplete)

	unlock, err := s.dir.Lock(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", s.path, err)
	}
	defer unlock()
	m, err := s.loadManifest(false)
	if err != nil {
		return false, err
	}
	if f := m.Frontiers[s.part]; f.MessageID != s.base.MessageID {
		if f.MessageID < s.base.MessageID {
			return false, fmt.Errorf("%s: output directory %s: %w: the frontier of partition %s went back from %q to %q", s.path, s.dir.Path(), ErrProgressLost, s.part, s.base.MessageID, f.MessageID)
		}
		s.logf("%s: partition %s's frontier moved from %q to %q (another instance published); writing only the rows after it", s.path, s.part, s.base.MessageID, f.MessageID)
		s.base = f
		return true, nil
	}
	if data.rows == 0 {
		// The spool should hold rows up to spoolHigh above the frontier,
		// and only a publish that moves the frontier deletes them.
		return false, fmt.Errorf("%s: %w: the open table's spooled rows of partition %s (after %q, up to %q) are missing from the pipeline's store", s.path, ErrProgressLost, s.part, s.base.MessageID, s.spoolHigh)
	}
	ttl := s.p.TableTTL.Std()
	var names []string
	for _, pt := range tables {
		if pt.rows == 0 && m.hasSlot(pt.slot) {
			continue // another partition filled the slot
		}
		name := tableName(pt.slot, m.NextTable, s.p.format)
		m.NextTable++
		if err := s.dir.Publish(pt.temp.Name(), name); err != nil {
			s.removeAll(names)
			return false, fmt.Errorf("%s: %w", s.path, err)
		}
		pt.temp = nil
		names = append(names, name)
		mt := manifestTable{Name: name, Slot: pt.slot, Partition: s.part, Rows: pt.rows, Bytes: pt.bytes,
			Created: now.UTC(), Expires: later(pt.slot, now).Add(ttl).UTC()}
		if pt.rows > 0 {
			mt.FirstID, mt.LastID = pt.first, pt.last
		}
		m.Tables = append(m.Tables, mt)
	}
	crashAt(CrashTablePublished)
	nf := frontier{SystemTimestamp: data.lastTS, MessageID: data.last, LastSlot: t.slot}
	m.Frontiers[s.part] = nf
	gone := m.expire(now)
	if err := s.dir.WriteManifest(m.encode()); err != nil {
		s.removeAll(names)
		return false, fmt.Errorf("%s: %w", s.path, err)
	}
	crashAt(CrashProgressPublished)
	s.base = nf
	s.removeExpired(gone)
	s.nextExpiry = m.nextExpiry()
	s.toRecord = nf.MessageID
	s.mRows.Add(float64(data.rows))
	for _, pt := range tables {
		s.mBytes.Add(float64(pt.bytes))
		if pt.rows == 0 {
			s.mEmpty.Inc()
		}
	}
	s.mData.Inc()
	return false, nil
}

// removeAll removes published-but-unlisted files after a failed publish
// (best effort: the next Init's sweep removes what stays).
func (s *Sink) removeAll(names []string) {
	for _, n := range names {
		_ = s.dir.Remove(n)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// prepare writes rows as a table of slot into a synced temporary file.
func (s *Sink) prepare(slot time.Time, rows rowSource, cols []Column) (*preparedTable, error) {
	tf, err := s.dir.CreateTemp(s.tag, s.p.format.Ext())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	cw := &countWriter{w: &crashWriter{TempFile: tf}}
	pt := &preparedTable{temp: tf, slot: slot}
	counted := func(yield func(*pending) error) error {
		return rows(func(p *pending) error {
			if pt.rows == 0 {
				pt.first = p.msg.ID
			}
			pt.rows++
			pt.last, pt.lastTS = p.msg.ID, p.msg.SystemTimestamp
			return yield(p)
		})
	}
	if s.p.format == Parquet {
		meta := map[string]string{"weir.sink": s.path, "weir.partition": s.part, "weir.slot": slot.UTC().Format(time.RFC3339)}
		err = writeParquet(cw, cols, s.codec, counted, meta)
	} else {
		err = writeJSONL(cw, counted)
	}
	if err == nil {
		err = tf.Commit()
	}
	if err != nil {
		tf.Abort()
		if errors.Is(err, errRowRefused) {
			return nil, fmt.Errorf("%s: output directory %s: table of slot %s: %w; %s", s.path, s.dir.Path(), slot.Format(time.RFC3339), err, rowRefusedHint)
		}
		return nil, fmt.Errorf("%s: table of slot %s: %w", s.path, slot.Format(time.RFC3339), err)
	}
	pt.bytes = cw.n
	return pt, nil
}

// expireNow removes expired tables outside a publish.
func (s *Sink) expireNow(ctx context.Context, now time.Time) error {
	unlock, err := s.dir.Lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	defer unlock()
	m, err := s.loadManifest(false)
	if err != nil {
		return err
	}
	if gone := m.expire(now); len(gone) > 0 {
		if err := s.dir.WriteManifest(m.encode()); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		s.removeExpired(gone)
	}
	s.nextExpiry = m.nextExpiry()
	return nil
}

type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func sortedColumns(cols []Column) []Column {
	out := append([]Column(nil), cols...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// sanitize keeps a partition id readable in file names.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// The sink's partition state: version byte, then the frontier message id
// the pipeline recorded as published (codec string). Version 2 is the
// same record in a pipeline whose open tables are spooled (spool.go): a
// weir that does not know the spool (it knows version 1 only) refuses the
// state rather than lose the spooled rows, which the outbox no longer
// holds.
const sinkStateVersion = 2

func encodeSinkState(id msgid.ID) []byte {
	return codec.AppendString([]byte{sinkStateVersion}, string(id))
}

// decodeSinkState returns the recorded frontier and the state's version.
func decodeSinkState(b []byte) (msgid.ID, byte, error) {
	if len(b) == 0 || (b[0] != 1 && b[0] != sinkStateVersion) {
		return "", 0, errors.New("unknown ArrivalOrderTableSink state version")
	}
	id, _, err := codec.String(b[1:])
	return msgid.ID(id), b[0], err
}

// sinkOwner returns the owner id of the sink at spec path in this
// pipeline's store, creating it on first use. The manifest records it, so
// a second pipeline (or sink) pointed at the same directory is refused.
func sinkOwner(ctx context.Context, st store.Store, path string) (string, error) {
	key := codec.AppendString([]byte("owner/"), path)
	for attempt := 0; attempt < 3; attempt++ {
		v, ok, err := st.Get(ctx, catalogTable, key)
		if err != nil {
			return "", fmt.Errorf("read sink owner: %w", err)
		}
		if ok {
			return string(v), nil
		}
		var r [16]byte
		_, _ = rand.Read(r[:])
		txn := store.NewTxn()
		txn.CheckAbsent(catalogTable, key)
		txn.Put(catalogTable, key, []byte(hex.EncodeToString(r[:])))
		if err := st.Commit(ctx, txn); err != nil && !errors.Is(err, store.ErrConflict) {
			return "", fmt.Errorf("write sink owner: %w", err)
		}
	}
	return "", errors.New("sink owner id: concurrent creation did not settle")
}
