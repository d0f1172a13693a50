package job

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// sourceReader reads one source partition for a source computation and
// keeps its position, which advances only with the epoch commit.
//
// TransformOrderedSource: the records of an epoch, their outputs and the new
// position commit together; ids use the epoch timestamp.
//
// SwiftOrderedSource: outputs are not materialized, so a record's offset is
// persisted only once all its outputs are delivered, and a replay after a
// restart must rebuild the same ids. Each read batch gets a fresh sequence
// number — a store timestamp — memorized per offset range in the partition
// state (Flow's OffsetMemory) and committed before any output leaves; a
// replay reuses the memorized sequence number, so it yields identical ids.
// The same memorized timestamp is the messages' SystemTimestamp (Flow's
// TSwiftOrderedSourceTimestampMemory), not the record's write time: a
// source partition that appears late, or a record written long ago, must
// not look processed to receivers whose input SystemWatermark already
// passed its write time. A store timestamp issued at read time is above
// every watermark published so far, and the partition's reports bound the
// watermark by the smallest timestamp a replay can still reuse.
type sourceReader struct {
	j      *Job
	part   connector.SourcePartition
	key    weir.Key
	stream string
	swift  bool

	persisted connector.Offset // committed: every offset below is processed
	reported  connector.Offset // last offset reported to the source
	readNext  connector.Offset
	end       bool
	// replayBelow: offsets below it were read by an earlier life (their
	// sequence numbers are in the memory loaded at start), so their outputs
	// may have been delivered before.
	replayBelow connector.Offset
	memory      []memRange
	memDirty    bool
	// inflight counts the records read and not yet done (swift), and
	// inflightTS holds their SystemTimestamps.
	inflight   int
	inflightTS tsMultiset
	done       map[connector.Offset]bool
	skip       map[connector.Offset]connector.Offset // swift: gap [from, to) with no record
	// cursor is the partition when it keeps a cursor (Transform only): its
	// cursor commits with every change of the position.
	cursor connector.CursorPartition

	// readToEnd: this epoch read the partition and found its end (the job
	// may then wait for the partition to grow: wake).
	readToEnd bool
	// reporter and notifier are part as the optional interfaces it
	// implements (nil if not): its committed position is written in the
	// epoch transaction; it says when it grew.
	reporter connector.TxnReporter
	notifier connector.ReadNotifier

	maxEvent     time.Time
	lastRecordAt time.Time
	// idBuf is messages' buffer for a batch's ids, reused.
	idBuf []byte
}

// memRange says offsets in [from, to) got sequence number seq.
type memRange struct {
	from, to connector.Offset
	seq      uint64
}

type sourceBatch struct {
	records []connector.Record
	next    connector.Offset
	end     bool
}

const (
	sourceStateName  = "source"
	sourceCursorName = "source_cursor"
)

func openSourceReader(ctx context.Context, j *Job, key string) (*sourceReader, error) {
	part, err := j.comp.Source.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("job %s: open source partition %s: %w", j.cfg.Partition.ID, key, err)
	}
	r := &sourceReader{
		j: j, part: part, stream: j.comp.SourceStream, swift: j.comp.Swift(),
		key:  weir.Key{Hash: codec.Hash64([]byte(key)), Encoded: key},
		done: map[connector.Offset]bool{},
		skip: map[connector.Offset]connector.Offset{},
	}
	r.reporter, _ = part.(connector.TxnReporter)
	r.notifier, _ = part.(connector.ReadNotifier)
	v, ok, err := j.st.Get(ctx, store.PartitionStates, r.stateKey())
	if err != nil {
		return nil, fmt.Errorf("job %s: read source state: %w", j.cfg.Partition.ID, err)
	}
	if ok {
		if err := r.decodeState(v); err != nil {
			return nil, fmt.Errorf("job %s: source state: %w", j.cfg.Partition.ID, err)
		}
	}
	if cp, ok := part.(connector.CursorPartition); ok {
		if r.swift {
			return nil, fmt.Errorf("job %s: source partition %s keeps a cursor; a Swift computation cannot read it (use a Transform)", j.cfg.Partition.ID, key)
		}
		c, _, err := j.st.Get(ctx, store.PartitionStates, r.cursorKey())
		if err != nil {
			return nil, fmt.Errorf("job %s: read source cursor: %w", j.cfg.Partition.ID, err)
		}
		if err := cp.Resume(r.persisted, c); err != nil {
			return nil, fmt.Errorf("job %s: resume source partition %s: %w", j.cfg.Partition.ID, key, err)
		}
		r.cursor = cp
	}
	r.readNext = r.persisted
	r.reported = r.persisted
	for _, m := range r.memory {
		r.replayBelow = max(r.replayBelow, m.to)
	}
	r.lastRecordAt = j.st.Now()
	return r, nil
}

func (r *sourceReader) stateKey() []byte {
	return tables.PartitionStateKey(string(r.j.cfg.Partition.ID), sourceStateName)
}

// cursorKey is the partition state row of a CursorPartition's cursor.
func (r *sourceReader) cursorKey() []byte {
	return tables.PartitionStateKey(string(r.j.cfg.Partition.ID), sourceCursorName)
}

func (r *sourceReader) read(ctx context.Context, maxRows, maxBytes int) (*sourceBatch, error) {
	b, err := r.part.Read(ctx, r.readNext, maxRows, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("source %s: read at offset %d: %w", r.part.Key(), r.readNext, err)
	}
	r.end = b.End
	r.readToEnd = b.End
	if len(b.Records) == 0 {
		// Offsets that hold no record (a run of empty tables, trailing
		// transaction markers) are passed over: the position moves to
		// b.Next with the next commit, so they are not read again.
		if b.Next > r.readNext {
			if r.swift {
				r.skip[r.readNext] = b.Next
			}
			r.readNext = b.Next
		}
		return nil, nil
	}
	// Offsets strictly increase from readNext. A source may skip offsets
	// that hold no record (Kafka: transaction markers, aborted records,
	// compacted keys): a gap [from, to) before a record or before b.Next is
	// recorded so that a Swift reader's persisted position can pass it (no
	// record there will ever be marked done).
	expect := r.readNext
	var gaps [][2]connector.Offset
	for i, rec := range b.Records {
		if rec.Offset < expect {
			return nil, fmt.Errorf("source %s: record %d has offset %d, expected at least %d (offsets must increase)", r.part.Key(), i, rec.Offset, expect)
		}
		if rec.WriteTimestamp == 0 {
			return nil, fmt.Errorf("source %s: record at offset %d has no write timestamp", r.part.Key(), rec.Offset)
		}
		if rec.Offset > expect {
			gaps = append(gaps, [2]connector.Offset{expect, rec.Offset})
		}
		expect = rec.Offset + 1
	}
	if b.Next < expect {
		return nil, fmt.Errorf("source %s: batch ends at offset %d, before its last record's next offset %d", r.part.Key(), b.Next, expect)
	}
	if b.Next > expect {
		gaps = append(gaps, [2]connector.Offset{expect, b.Next})
	}
	if r.swift {
		for _, g := range gaps {
			r.skip[g[0]] = g[1]
		}
	}
	r.readNext = b.Next
	return &sourceBatch{records: b.Records, next: b.Next, end: b.End}, nil
}

// wake returns a channel closed once the partition may have records past
// what this epoch read, when the epoch read to its end and the partition
// can tell (connector.ReadNotifier); nil otherwise (the job polls). An
// epoch that did not read (blocked, draining) gets nil: its wait is for
// room or control, not input.
func (r *sourceReader) wake() <-chan struct{} {
	if !r.readToEnd || r.notifier == nil {
		return nil
	}
	return r.notifier.Readable(r.readNext)
}

// messages turns a batch into messages of the source stream.
func (r *sourceReader) messages(b *sourceBatch, ts store.Timestamp) []*weir.Message {
	out := make([]*weir.Message, 0, len(b.records))
	// One block for the batch's messages, one buffer (then one string) for
	// their ids.
	slab := make([]weir.Message, len(b.records))
	idBuf := r.idBuf[:0] // becomes one string below: reusable after
	ends := make([]int, 0, len(b.records))
	now := r.j.st.Now()
	for i, rec := range b.records {
		seq := uint64(ts)
		if r.swift {
			seq = r.seqFor(rec.Offset, b.next, uint64(ts))
		}
		ev := rec.EventTimestamp
		if col := r.j.comp.Watermark.EventColumn; col != "" {
			if t, ok := eventTimeOf(rec.Row[col]); ok {
				ev = t
			}
		}
		if ev.IsZero() {
			ev = rec.WriteTimestamp.Time()
		}
		sys := rec.WriteTimestamp
		if r.swift {
			sys = store.Timestamp(seq)
		}
		m := &slab[i]
		*m = weir.Message{
			Stream:             r.stream,
			Key:                r.key,
			SystemTimestamp:    sys,
			AlignmentTimestamp: rec.WriteTimestamp,
			EventTimestamp:     ev,
			Payload:            canonicalRecord(rec.Row),
		}
		idBuf = msgid.AppendOrdered(idBuf, seq, r.stream, uint64(rec.Offset))
		ends = append(ends, len(idBuf))
		if ev.After(r.maxEvent) {
			r.maxEvent = ev
		}
		out = append(out, m)
	}
	ids := string(idBuf)
	r.idBuf = idBuf[:0]
	from := 0
	for i, m := range out {
		m.ID = msgid.ID(ids[from:ends[i]])
		from = ends[i]
		rec := b.records[i]
		if rec.Offset < r.replayBelow {
			r.j.suspect[m.ID] = true
		}
		if r.swift {
			r.inflight++
			r.inflightTS.add(m.SystemTimestamp)
		}
	}
	if r.swift {
		// The tracker holds each record until its outputs are delivered,
		// and hands it back to markDone with its offset.
		r.j.swift.addSourceRecords(out, b.records)
	}
	r.lastRecordAt = now
	return out
}

// seqFor returns the memorized sequence number of offset, memorizing ts for
// [offset, batchEnd) if no range covers it.
func (r *sourceReader) seqFor(off, batchEnd connector.Offset, ts uint64) uint64 {
	for _, m := range r.memory {
		if off >= m.from && off < m.to {
			return m.seq
		}
	}
	end := batchEnd
	for _, m := range r.memory {
		if m.from > off && m.from < end {
			end = m.from
		}
	}
	r.memory = append(r.memory, memRange{from: off, to: end, seq: ts})
	r.memDirty = true
	return ts
}

// markDone records that every output of these source messages is delivered.
func (r *sourceReader) markDone(done []*swiftParent) {
	for _, p := range done {
		if !p.fromSource {
			continue
		}
		r.inflight--
		r.inflightTS.remove(p.msg.SystemTimestamp)
		r.done[p.offset] = true
	}
}

// dirty reports whether the persisted position can advance or the memory
// changed, i.e. whether an epoch must commit even without new records.
func (r *sourceReader) dirty() bool {
	if !r.swift {
		return r.memDirty || r.persisted != r.readNext
	}
	_, gap := r.skip[r.persisted]
	return r.memDirty || r.done[r.persisted] || gap
}

// sync writes the partition's new position (and memory) into txn.
func (r *sourceReader) sync(txn *store.Txn) error {
	changed := r.memDirty
	if r.swift {
		for {
			if r.done[r.persisted] {
				delete(r.done, r.persisted)
				r.persisted++
			} else if to, ok := r.skip[r.persisted]; ok {
				delete(r.skip, r.persisted)
				r.persisted = to
			} else {
				break
			}
			changed = true
		}
		kept := r.memory[:0]
		for _, m := range r.memory {
			if m.to > r.persisted {
				kept = append(kept, m)
			}
		}
		r.memory = kept
	} else if r.persisted != r.readNext {
		// A Transform source processes everything it read in the epoch
		// that read it: the position is what it read up to.
		r.persisted = r.readNext
		changed = true
		if r.cursor != nil {
			c, err := r.cursor.Cursor(r.persisted)
			if err != nil {
				return fmt.Errorf("source %s: cursor at offset %d: %w", r.part.Key(), r.persisted, err)
			}
			txn.Put(store.PartitionStates, r.cursorKey(), c)
		}
	}
	if changed {
		txn.Put(store.PartitionStates, r.stateKey(), r.encodeState())
		if r.reporter != nil && r.persisted != r.reported {
			r.reporter.ReportInTxn(txn, r.persisted)
		}
	}
	r.memDirty = false
	return nil
}

// committed reports the committed position to the source (advisory),
// unless sync wrote it into the epoch's transaction (connector.TxnReporter).
func (r *sourceReader) committed(ctx context.Context) {
	if r.persisted == r.reported {
		return
	}
	if r.reporter != nil {
		r.reported = r.persisted
		return
	}
	if err := r.part.ReportCommitted(ctx, r.persisted); err != nil {
		r.j.cfg.Logf("source %s: report committed offset %d: %v", r.part.Key(), r.persisted, err)
		return
	}
	r.reported = r.persisted
}

// finished: a finite partition fully read, processed and committed.
func (r *sourceReader) finished() bool {
	return r.part.Finite() && r.end && r.persisted == r.readNext && r.inflight == 0
}

// eventWatermark is the partition's event-time watermark (max event time
// seen minus out_of_orderness_bound), and whether the partition is idle.
func (r *sourceReader) eventWatermark(now time.Time) (time.Time, bool) {
	wm := time.Time{}
	if !r.maxEvent.IsZero() {
		wm = r.maxEvent.Add(-r.j.comp.Watermark.OutOfOrdernessBound)
	}
	idle := r.end && (r.part.Finite() || (r.j.comp.Watermark.IdleTimeout > 0 && now.Sub(r.lastRecordAt) >= r.j.comp.Watermark.IdleTimeout))
	return wm, idle
}

// nextSystemTimestamp bounds the SystemTimestamp of any output of a Swift
// source not yet delivered, now or later: the oldest in-flight record's;
// the memorized sequence number of any offset range not yet persisted (a
// replay reuses it); otherwise above the job's last epoch timestamp, since
// a record read later gets a fresh store timestamp. An empty partition, or
// one that has read nothing since its job started, therefore reports a
// bound that advances with its epochs and lease probes instead of pinning
// the stream's SystemWatermark (and its dedup garbage collection) at zero.
func (r *sourceReader) nextSystemTimestamp() store.Timestamp {
	bound := r.j.lastTS + 1
	if m, ok := r.inflightTS.min(); ok {
		bound = min(bound, m)
	}
	for _, m := range r.memory {
		if m.to > r.persisted {
			bound = min(bound, store.Timestamp(m.seq))
		}
	}
	return bound
}

func (r *sourceReader) close() error { return r.part.Close() }

func (r *sourceReader) encodeState() []byte {
	b := []byte{tables.RecordVersion}
	b = codec.AppendUvarint(b, uint64(r.persisted))
	b = codec.AppendUvarint(b, uint64(len(r.memory)))
	for _, m := range r.memory {
		b = codec.AppendUvarint(b, uint64(m.from))
		b = codec.AppendUvarint(b, uint64(m.to))
		b = codec.AppendUvarint(b, m.seq)
	}
	return b
}

func (r *sourceReader) decodeState(b []byte) error {
	if len(b) == 0 || b[0] != tables.RecordVersion {
		return fmt.Errorf("unknown source state version")
	}
	rd := tables.Reader{B: b[1:]}
	r.persisted = connector.Offset(rd.Uvarint())
	n := rd.Uvarint()
	for i := uint64(0); i < n && rd.Err == nil; i++ {
		r.memory = append(r.memory, memRange{from: connector.Offset(rd.Uvarint()), to: connector.Offset(rd.Uvarint()), seq: rd.Uvarint()})
	}
	return rd.Err
}

// eventTimeOf reads an event-time column value: integers are unix
// milliseconds, floats unix seconds, strings RFC 3339.
func eventTimeOf(v any) (time.Time, bool) {
	switch x := v.(type) {
	case int64:
		return time.UnixMilli(x).UTC(), true
	case uint64:
		return time.UnixMilli(int64(x)).UTC(), true
	case float64:
		return time.Unix(0, int64(x*1e9)).UTC(), true
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	}
	return time.Time{}, false
}

// canonicalRecord is a source record's row with canonical values
// (codec.Canonical). A value rows cannot hold is left as it is: the
// record's processing fails when user code emits it, with an error naming
// the source partition and offset.
func canonicalRecord(row weir.Row) weir.Row {
	if c, err := codec.Canonical(row); err == nil {
		return c
	}
	return row
}
