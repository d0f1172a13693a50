package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// SourceClassName is KafkaSource's source_class_name.
const SourceClassName = "KafkaSource"

// Source is KafkaSource: one source partition per Kafka partition of the
// topic (within partition_filter), keyed "<topic>/<partition>".
//
// Exactly-once: the pipeline's position in a partition is part of its
// partition state and advances only with the epoch commit (the runtime
// does that); the source never reads a position back from Kafka. Offsets
// are the Kafka offsets themselves, so they have gaps: transaction markers
// (read as control records and skipped), aborted records (filtered in
// read_committed), compacted keys and records skipped as malformed. A batch
// says so by its record offsets and by Batch.Next, which may lie beyond its
// last record.
type Source struct {
	id     string
	path   string
	params *SourceParams
	conn   *conn
	opts   Options
	st     store.Store
	logf   func(format string, args ...any)

	mu     sync.Mutex
	listed int32 // partition count at Partitions, -1 before
	seen   int32 // partition count last seen by the count check
	first  int32 // first partition read (it reports count changes)

	// groupMu serializes group commits; groupCommitted holds, per
	// partition, the highest offset committed to group_id by any job of
	// this process: a zombie's late report must not move the group's offset
	// back (see commitGroup).
	groupMu        sync.Mutex
	groupCommitted map[int32]int64
}

// NewSource builds a KafkaSource from its spec parameters. It checks them
// but does not connect: the first connection is made by Partitions.
func NewSource(sp connector.SourceParams, o Options) (*Source, error) {
	path := sp.Path + ".parameters"
	p, err := ParseSourceParams(path, sp.Parameters)
	if err != nil {
		return nil, err
	}
	c, err := p.resolve(path, &o)
	if err != nil {
		return nil, err
	}
	return &Source{id: sp.SourceID, path: sp.Path, params: p, conn: c, opts: o, st: sp.Store, logf: o.logger(), listed: -1}, nil
}

func (o Options) logger() func(string, ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	return defaultLogf
}

// clientOpts are the options of every client of this source.
func (s *Source) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	return append(append(s.conn.opts(), s.opts.ClientOpts...), extra...)
}

// metadataTimeout bounds the metadata requests of Partitions and of the
// partition count check.
const metadataTimeout = 30 * time.Second

// partitionCount asks the brokers how many partitions the topic has
// (through the client's metadata cache, at most MetadataMinAge old).
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("list topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok {
		return 0, fmt.Errorf("topic %s does not exist", topic)
	}
	if d.Err != nil {
		return 0, fmt.Errorf("topic %s: %w", topic, d.Err)
	}
	return int32(len(d.Partitions)), nil
}

// Partitions lists "<topic>/<p>" for the topic's partitions within
// partition_filter, in partition order. The controller calls it when it
// lays out the pipeline and then every re-list period (10s), so partitions
// added later get jobs without a restart (the source also logs the change,
// see update_partition_count_period).
func (s *Source) Partitions(ctx context.Context) ([]string, error) {
	cl, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("%s: kafka client: %w", s.path, err)
	}
	defer cl.Close()
	n, err := partitionCount(ctx, kadm.NewClient(cl), s.params.Topic)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	lo, hi := s.bounds(n)
	s.mu.Lock()
	s.listed, s.seen, s.first = n, n, lo
	s.mu.Unlock()
	var keys []string
	for p := lo; p < hi; p++ {
		keys = append(keys, partitionKey(s.params.Topic, p))
	}
	return keys, nil
}

// bounds is partition_filter applied to n partitions.
func (s *Source) bounds(n int32) (lo, hi int32) {
	lo, hi = 0, n
	if f := s.params.PartitionFilter; f != nil {
		lo, hi = int32(f[0]), min(hi, int32(f[1]))
	}
	return lo, max(lo, hi)
}

func partitionKey(topic string, p int32) string { return topic + "/" + strconv.Itoa(int(p)) }

// Open opens the partition named by key ("<topic>/<p>"). It does not
// connect; the first Read does.
func (s *Source) Open(_ context.Context, key string) (connector.SourcePartition, error) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 || key[:i] != s.params.Topic {
		return nil, fmt.Errorf("%s: partition key %q is not \"%s/<partition>\"", s.path, key, s.params.Topic)
	}
	n, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s: partition key %q is not \"%s/<partition>\"", s.path, key, s.params.Topic)
	}
	if f := s.params.PartitionFilter; f != nil && (n < f[0] || n >= f[1]) {
		return nil, fmt.Errorf("%s: partition %d is outside partition_filter %v", s.path, n, f)
	}
	return &sourcePartition{s: s, key: key, p: int32(n), end: -1, knownEnd: -1}, nil
}

// Close releases nothing: every client belongs to a partition or to one
// call.
func (s *Source) Close() error { return nil }

// sourcePartition reads one Kafka partition with its own client (direct
// partition assignment, no consumer group membership).
//
// Invariant: next is the partition's read position: every offset below it
// was returned in a batch, or holds no record to return (a gap, a control
// record, a skipped malformed record). buf holds fetched records at or
// above next, in offset order.
type sourcePartition struct {
	s   *Source
	key string
	p   int32

	cl  *kgo.Client
	adm *kadm.Client

	started bool
	next    connector.Offset
	// handed is the Next of the last batch with records (or the seek
	// position): where the runtime reads on from.
	handed connector.Offset
	// seeked: the first records after a seek are checked for a gap.
	seeked bool
	buf    []*kgo.Record

	// floor is the smallest WriteTimestamp the next record may get; see
	// writeTimestamp.
	floor store.Timestamp
	// recent holds the (offset, WriteTimestamp) of records returned and not
	// yet reported committed; cp is the last timestamp checkpoint.
	recent []tsMark
	cp     checkpoint

	end      int64 // finite: the end offset, -1 until known
	knownEnd int64 // the last end (LSO or high watermark) a fetch reported

	lastCountCheck time.Time
	lastReport     time.Time
	// groupWant is the highest position reported committed (ReportCommitted),
	// for group_id: a report skipped by the rate limit is committed to the
	// group by a later Read or by Close, so that the group offset reaches
	// the end of a finite partition even when no report after the last one
	// comes (its job stopped reading once done).
	groupWant connector.Offset
	skipped   uint64
	// answeredAt is when the brokers last answered for the partition (a
	// fetch response naming it, or an end-offset request); zero before the
	// first answer. See checkReachable.
	answeredAt time.Time
}

// reportPeriod bounds how often ReportCommitted writes the timestamp
// checkpoint and commits to group_id while the partition has a backlog.
const reportPeriod = time.Second

type tsMark struct {
	off connector.Offset
	ts  store.Timestamp
}

// checkpoint says the first record at or after off gets a WriteTimestamp
// of at least floor.
type checkpoint struct {
	off   connector.Offset
	floor store.Timestamp
	ok    bool
}

func (sp *sourcePartition) Key() string  { return sp.key }
func (sp *sourcePartition) Finite() bool { return sp.s.params.Finite }

func (sp *sourcePartition) Close() error {
	sp.flushGroup()
	if sp.cl != nil {
		sp.cl.Close()
		sp.cl = nil
	}
	return nil
}

// Read returns the records at and after from. See Source for the offsets.
func (sp *sourcePartition) Read(ctx context.Context, from connector.Offset, maxRows, maxBytes int) (connector.Batch, error) {
	// The runtime reads on from the Next of the last batch with records; an
	// empty batch's Next (past a trailing gap) is not taken, so from may lag
	// behind next by a gap that holds no record: no seek for that.
	if !sp.started || (from != sp.next && from != sp.handed) {
		if err := sp.seek(ctx, from); err != nil {
			return connector.Batch{}, err
		}
	}
	sp.checkPartitionCount(ctx)
	if time.Since(sp.lastReport) >= reportPeriod && sp.groupWant > 0 {
		sp.lastReport = time.Now()
		if err := sp.commitGroup(ctx, sp.groupWant); err != nil {
			sp.s.logf("kafka source %s: %s: %v", sp.s.path, sp.key, err)
		}
	}
	polled := false
	if len(sp.buf) == 0 {
		if err := sp.poll(ctx, maxRows); err != nil {
			return connector.Batch{}, err
		}
		polled = true
	}
	b := connector.Batch{Next: sp.next}
	bytes := 0
	for len(sp.buf) > 0 && len(b.Records) < maxRows {
		r := sp.buf[0]
		off := connector.Offset(r.Offset)
		if sp.end >= 0 && r.Offset >= sp.end {
			// Finite: every offset below end is resolved (a record at or
			// past it exists), so the rest of [next, end) is a gap.
			sp.next = max(sp.next, connector.Offset(sp.end))
			break
		}
		if r.Attrs.IsControl() {
			sp.buf = sp.buf[1:]
			sp.next = off + 1
			continue
		}
		row, err := sp.row(r)
		if err != nil {
			if sp.s.params.MalformedMessagePolicy == MalformedFail {
				return connector.Batch{}, fmt.Errorf("kafka source %s: topic %s partition %d offset %d: malformed message (malformed_message_policy = fail; use skip to skip such messages): %w",
					sp.s.path, r.Topic, r.Partition, r.Offset, err)
			}
			sp.skipped++
			sp.s.logf("kafka source %s: topic %s partition %d offset %d: skipping malformed message (%d skipped so far): %v",
				sp.s.path, r.Topic, r.Partition, r.Offset, sp.skipped, err)
			// The floor counts every data record, as the scan in seek does.
			sp.recent = append(sp.recent, tsMark{off: off, ts: sp.writeTimestamp(r)})
			sp.buf = sp.buf[1:]
			sp.next = off + 1
			continue
		}
		size := 64 + len(r.Key) + len(r.Value)
		if len(b.Records) > 0 && bytes+size > maxBytes {
			break
		}
		bytes += size
		ts := sp.writeTimestamp(r)
		b.Records = append(b.Records, connector.Record{
			Offset: off, WriteTimestamp: ts, EventTimestamp: r.Timestamp, Row: row, Size: size,
		})
		sp.recent = append(sp.recent, tsMark{off: off, ts: ts})
		sp.buf = sp.buf[1:]
		sp.next = off + 1
	}
	// Control records already fetched right after the batch are consumed
	// with it, so that Next (and the committed position) passes a trailing
	// transaction marker.
	for len(sp.buf) > 0 && sp.buf[0].Attrs.IsControl() && (sp.end < 0 || sp.buf[0].Offset < sp.end) {
		sp.next = connector.Offset(sp.buf[0].Offset + 1)
		sp.buf = sp.buf[1:]
	}
	b.Next = sp.next
	if len(b.Records) > 0 {
		sp.handed = sp.next
	} else if polled {
		if err := sp.checkReachable(ctx); err != nil {
			return connector.Batch{}, err
		}
	}
	switch {
	case sp.end >= 0:
		b.End = int64(sp.next) >= sp.end
	default:
		b.End = len(sp.buf) == 0 && (polled && len(b.Records) == 0 || int64(sp.next) >= sp.knownEnd)
	}
	return b, nil
}

// writeTimestamp returns r's WriteTimestamp and raises the floor past it.
//
// WriteTimestamp becomes the message's SystemTimestamp, and the runtime
// needs it strictly increasing within a partition and identical on every
// replay: watermarks assume no later record is older than one already
// processed (a receiver drops a message below its input's watermark as
// processed), and the receivers' dedup rows are keyed by it. Kafka record
// timestamps are neither (a producer sets CreateTime; many records share a
// millisecond). So WriteTimestamp is max(record time, floor), where floor is
// one past the previous record's WriteTimestamp: strictly increasing, and a
// function of the log alone, since the floor at the pipeline's position is
// rebuilt on every seek from a persisted checkpoint (see seek). The record
// time is kept at millisecond precision: seconds in the Timestamp's high
// bits, milliseconds in the top of its counter.
func (sp *sourcePartition) writeTimestamp(r *kgo.Record) store.Timestamp {
	ts := max(recordTimestamp(r.Timestamp), sp.floor)
	sp.floor = ts + 1
	return ts
}

func recordTimestamp(t time.Time) store.Timestamp {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	return store.Timestamp(uint64(ms/1000)<<store.TimestampCounterBits | uint64(ms%1000)<<20)
}

// seek positions the partition at from. The WriteTimestamp floor at from is
// rebuilt by reading [checkpoint, from) (or the partition from its start if
// there is no usable checkpoint) without returning those records.
func (sp *sourcePartition) seek(ctx context.Context, from connector.Offset) error {
	cp, err := sp.loadCheckpoint(ctx)
	if err != nil {
		return err
	}
	start := connector.Offset(0)
	sp.floor = 1
	if cp.ok && cp.off <= from {
		start, sp.floor = cp.off, cp.floor
	}
	if sp.cl == nil {
		isolation := kgo.ReadCommitted()
		if sp.s.params.IsolationLevel == ReadUncommitted {
			isolation = kgo.ReadUncommitted()
		}
		cl, err := kgo.NewClient(sp.s.clientOpts(
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{sp.s.params.Topic: {sp.p: kgo.NewOffset().At(int64(start))}}),
			kgo.FetchIsolationLevel(isolation),
			kgo.KeepControlRecords(),
		)...)
		if err != nil {
			return fmt.Errorf("kafka source %s: client: %w", sp.s.path, err)
		}
		sp.cl, sp.adm = cl, kadm.NewClient(cl)
	} else {
		sp.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{sp.s.params.Topic: {sp.p: {Epoch: -1, Offset: int64(start)}}})
	}
	if sp.s.params.Finite && sp.end < 0 {
		if sp.end, err = sp.highWatermark(ctx); err != nil {
			return err
		}
	}
	sp.buf = nil
	sp.recent = nil
	sp.next, sp.handed = from, from
	sp.started, sp.seeked = true, true
	scanFrom := start
	// Scan [start, from) for the floor: until a record at or past from
	// shows up, or the log holds nothing at or past the scan position.
	for start < from {
		fs, err := sp.fetch(ctx, 1000)
		if err != nil {
			return err
		}
		for _, r := range fs {
			if r.Offset < int64(scanFrom) {
				continue // fetched before the seek
			}
			if r.Offset >= int64(from) {
				sp.buf = append(sp.buf, r)
				continue
			}
			start = connector.Offset(r.Offset + 1)
			if !r.Attrs.IsControl() {
				sp.writeTimestamp(r)
			}
		}
		if len(sp.buf) > 0 {
			break
		}
		if len(fs) == 0 {
			hw, err := sp.highWatermark(ctx)
			if err != nil {
				return err
			}
			if hw <= int64(start) {
				break
			}
		}
	}
	sp.cp = checkpoint{off: from, floor: sp.floor, ok: true}
	// The runtime reports only positions that move: after a restart at the
	// end of the partition nothing would correct a group offset left
	// behind by a crash between a commit and its report.
	if err := sp.commitGroup(ctx, from); err != nil {
		sp.s.logf("kafka source %s: %s: %v", sp.s.path, sp.key, err)
	}
	return nil
}

// checkReachable tells an idle partition from brokers that cannot be
// reached: the client keeps dialing in the background and a poll returns
// no error and no record either way, so an unreachable Kafka looked like a
// caught-up partition (and a finite one, not yet at its end, waited
// forever). After an empty poll, once per Options.ReachabilityPeriod
// without an answer from the brokers, it asks for the partition's end
// offset: its error (unable to dial, ...) fails the read, so that the job
// fails visibly and the controller restarts it with backoff.
func (sp *sourcePartition) checkReachable(ctx context.Context) error {
	if !sp.answeredAt.IsZero() && time.Since(sp.answeredAt) < sp.s.opts.reachabilityPeriod() {
		return nil
	}
	if _, err := sp.highWatermark(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last := "no answer yet"
		if !sp.answeredAt.IsZero() {
			last = fmt.Sprintf("last answer %v ago", time.Since(sp.answeredAt).Round(100*time.Millisecond))
		}
		return fmt.Errorf("%w (the brokers cannot be reached: %s)", err, last)
	}
	return nil
}

// highWatermark asks for the partition's end offset.
func (sp *sourcePartition) highWatermark(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	ends, err := sp.adm.ListEndOffsets(lctx, sp.s.params.Topic)
	if err != nil {
		return 0, fmt.Errorf("kafka source %s: end offset of %s: %w", sp.s.path, sp.key, err)
	}
	e, ok := ends.Lookup(sp.s.params.Topic, sp.p)
	if !ok {
		return 0, fmt.Errorf("kafka source %s: end offset of %s: partition not in the answer", sp.s.path, sp.key)
	}
	if e.Err != nil {
		return 0, fmt.Errorf("kafka source %s: end offset of %s: %w", sp.s.path, sp.key, e.Err)
	}
	sp.answeredAt = time.Now()
	return e.Offset, nil
}

// poll fetches more records into buf.
func (sp *sourcePartition) poll(ctx context.Context, maxRows int) error {
	fs, err := sp.fetch(ctx, maxRows)
	if err != nil {
		return err
	}
	for _, r := range fs {
		if r.Offset < int64(sp.next) {
			continue
		}
		if sp.seeked && r.Offset > int64(sp.next) {
			sp.s.logf("kafka source %s: %s: offsets [%d, %d) hold no record to read (aborted transactions, compaction, or retention)", sp.s.path, sp.key, sp.next, r.Offset)
		}
		sp.seeked = false
		sp.buf = append(sp.buf, r)
	}
	return nil
}

// fetch polls the client once, waiting at most poll_timeout.
func (sp *sourcePartition) fetch(ctx context.Context, maxRows int) ([]*kgo.Record, error) {
	pctx, cancel := context.WithTimeout(ctx, sp.s.params.PollTimeout.Std())
	defer cancel()
	fs := sp.cl.PollRecords(pctx, maxRows)
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		errs = append(errs, fmt.Errorf("topic %s partition %d: %w", t, p, err))
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("kafka source %s: fetch: %w", sp.s.path, err)
	}
	var out []*kgo.Record
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Partition != sp.p || p.Topic != sp.s.params.Topic {
			return
		}
		sp.answeredAt = time.Now()
		end := p.HighWatermark
		if sp.s.params.IsolationLevel == ReadCommitted && p.LastStableOffset >= 0 {
			end = p.LastStableOffset
		}
		if end >= 0 {
			sp.knownEnd = end
		}
		out = append(out, p.Records...)
	})
	return out, nil
}

// row decodes r per format, adding the $ columns.
func (sp *sourcePartition) row(r *kgo.Record) (weir.Row, error) {
	var row weir.Row
	switch sp.s.params.Format {
	case FormatRaw:
		row = weir.Row{"key": bytesOrNil(r.Key), "value": bytesOrNil(r.Value)}
	default:
		if r.Value == nil {
			return nil, errors.New("the value is null (a tombstone), not a JSON object")
		}
		var err error
		if row, err = codec.RowFromJSON(r.Value); err != nil {
			return nil, err
		}
	}
	row["$partition"] = int64(r.Partition)
	row["$offset"] = r.Offset
	row["$timestamp"] = r.Timestamp.UnixMilli()
	row["$key"] = bytesOrNil(r.Key)
	if len(r.Headers) > 0 {
		h := make(map[string]any, len(r.Headers))
		for _, x := range r.Headers {
			h[x.Key] = bytesOrNil(x.Value)
		}
		row["$headers"] = h
	}
	return row, nil
}

// bytesOrNil keeps a nil slice nil (a null column), else copies nothing:
// kgo hands each record its own slices.
func bytesOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// ReportCommitted runs after an epoch commit: every offset below next is
// processed. It persists the WriteTimestamp checkpoint at next (so a later
// seek rebuilds the floor from here) and, with group_id, commits next to
// the group for lag tools; at most once per reportPeriod while the
// partition has a backlog, and whenever it is caught up. Both are
// advisory: a lost or skipped report only makes the next seek scan further
// back, or a lag tool lag.
func (sp *sourcePartition) ReportCommitted(ctx context.Context, next connector.Offset) error {
	if !sp.cp.ok || next <= sp.cp.off {
		return nil
	}
	floor := sp.cp.floor
	i := 0
	for ; i < len(sp.recent) && sp.recent[i].off < next; i++ {
		floor = sp.recent[i].ts + 1
	}
	sp.recent = sp.recent[i:]
	sp.cp = checkpoint{off: next, floor: floor, ok: true}
	// Reports cost a store commit and a Kafka request each; any older
	// checkpoint is still correct (a seek scans from it), so they are
	// rate-limited, except at the end of what is readable now.
	caughtUp := next == sp.handed && len(sp.buf) == 0
	lag := next
	if next == sp.handed {
		lag = sp.next // past a trailing gap (a transaction marker)
	}
	sp.groupWant = max(sp.groupWant, lag)
	if !caughtUp && time.Since(sp.lastReport) < reportPeriod {
		return nil // the group offset follows at the next Read or at Close (flushGroup)
	}
	sp.lastReport = time.Now()
	var errs []error
	if st := sp.s.st; st != nil {
		txn := store.NewTxn()
		txn.Put(store.Consumers, sp.checkpointKey(), encodeCheckpoint(sp.cp))
		if err := st.Commit(ctx, txn); err != nil {
			errs = append(errs, fmt.Errorf("timestamp checkpoint: %w", err))
		}
	}
	if err := sp.commitGroup(ctx, sp.groupWant); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka source %s: %s: %w", sp.s.path, sp.key, err)
	}
	return nil
}

// flushGroup commits the last reported position to group_id if a rate
// limit or a failure held it back (best effort, bounded: it runs when the
// partition is closed, and a lag tool's view is advisory). Answers that
// say "not now" are retried for up to 10 s: a broker that has just
// restarted answers UNKNOWN_TOPIC_OR_PARTITION or NOT_COORDINATOR for a
// while, and a finite partition's last report would otherwise leave the
// group behind for good (seen on a real broker SIGKILLed mid-run). A
// broker that cannot be dialed is not waited for.
func (sp *sourcePartition) flushGroup() {
	if sp.groupWant == 0 || sp.s.params.GroupID == "" || sp.adm == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := retryCoordinator(ctx, func() error { return sp.commitGroup(ctx, sp.groupWant) }); err != nil {
		sp.s.logf("kafka source %s: %s: %v", sp.s.path, sp.key, err)
	}
}

// commitGroup commits off to group_id, if set (for lag tools only). The
// group offset only moves forward within this process: a job replaced
// while it still runs (a zombie) reports after the commit, without its
// lease, and its older offset is skipped. Commits are serialized per
// source, so two jobs of one partition cannot interleave theirs. (A zombie
// in another process — the distributed mode — can still commit an older
// offset: the group offset is advisory, the pipeline's own position is in
// its partition state.)
func (sp *sourcePartition) commitGroup(ctx context.Context, off connector.Offset) error {
	g := sp.s.params.GroupID
	if g == "" || sp.adm == nil {
		return nil
	}
	s := sp.s
	s.groupMu.Lock()
	defer s.groupMu.Unlock()
	if s.groupCommitted == nil {
		s.groupCommitted = map[int32]int64{}
	}
	if prev, ok := s.groupCommitted[sp.p]; ok && int64(off) <= prev {
		return nil
	}
	os := kadm.Offsets{}
	os.AddOffset(s.params.Topic, sp.p, int64(off), -1)
	resp, err := sp.adm.CommitOffsets(ctx, g, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit offset %d to group %s: %w", off, g, err)
	}
	s.groupCommitted[sp.p] = int64(off)
	return nil
}

func (sp *sourcePartition) checkpointKey() []byte {
	k := []byte("kafka_source\x00" + sp.s.id + "\x00" + sp.s.params.Topic + "\x00")
	return binary.BigEndian.AppendUint32(k, uint32(sp.p))
}

func encodeCheckpoint(cp checkpoint) []byte {
	b := []byte{1}
	b = codec.AppendUvarint(b, uint64(cp.off))
	return codec.AppendUvarint(b, uint64(cp.floor))
}

func (sp *sourcePartition) loadCheckpoint(ctx context.Context) (checkpoint, error) {
	if sp.s.st == nil {
		return checkpoint{}, nil
	}
	v, ok, err := sp.s.st.Get(ctx, store.Consumers, sp.checkpointKey())
	if err != nil {
		return checkpoint{}, fmt.Errorf("kafka source %s: %s: read timestamp checkpoint: %w", sp.s.path, sp.key, err)
	}
	if !ok {
		return checkpoint{}, nil
	}
	if len(v) == 0 || v[0] != 1 {
		return checkpoint{}, fmt.Errorf("kafka source %s: %s: unknown timestamp checkpoint version", sp.s.path, sp.key)
	}
	off, rest, err := codec.Uvarint(v[1:])
	if err != nil {
		return checkpoint{}, fmt.Errorf("kafka source %s: %s: timestamp checkpoint: %w", sp.s.path, sp.key, err)
	}
	floor, _, err := codec.Uvarint(rest)
	if err != nil {
		return checkpoint{}, fmt.Errorf("kafka source %s: %s: timestamp checkpoint: %w", sp.s.path, sp.key, err)
	}
	return checkpoint{off: connector.Offset(off), floor: store.Timestamp(floor), ok: true}, nil
}

// checkPartitionCount compares the topic's partition count with the one
// last listed, every update_partition_count_period, from the first
// partition's reader only, and logs a change; the controller's next re-list
// (every 10s) starts jobs for new partitions.
func (sp *sourcePartition) checkPartitionCount(ctx context.Context) {
	period := sp.s.params.UpdatePartitionCountPeriod.Std()
	sp.s.mu.Lock()
	listed, seen, first := sp.s.listed, sp.s.seen, sp.s.first
	sp.s.mu.Unlock()
	if period <= 0 || listed < 0 || sp.p != first || time.Since(sp.lastCountCheck) < period {
		return
	}
	if sp.lastCountCheck.IsZero() {
		sp.lastCountCheck = time.Now()
		return
	}
	sp.lastCountCheck = time.Now()
	n, err := partitionCount(ctx, sp.adm, sp.s.params.Topic)
	if err != nil {
		sp.s.logf("kafka source %s: partition count check: %v", sp.s.path, err)
		return
	}
	if n != seen {
		lo, hi := sp.s.bounds(listed)
		sp.s.logf("kafka source %s: topic %s now has %d partitions; the pipeline reads partitions [%d, %d) as last listed, and the controller's next re-list (every 10s) starts jobs for new ones",
			sp.s.path, sp.s.params.Topic, n, lo, hi)
		sp.s.mu.Lock()
		sp.s.seen = n
		sp.s.mu.Unlock()
	}
}
