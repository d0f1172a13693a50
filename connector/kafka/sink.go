package kafka

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Sink class names.
const (
	SinkClassName            = "KafkaSink"
	AtLeastOnceSinkClassName = "AtLeastOnceKafkaSink"
)

// Sink is KafkaSink: an ordered transactional-outbox sink
// (connector.OrderedAsyncSink) whose writer produces to a Kafka topic after
// the epoch commit.
//
// Exactly-once (default): the messages of one write are produced in one
// Kafka transaction whose transactional id is transactional_id_prefix +
// the sink's persisted producer id, together with a progress marker: an
// offset commit, inside the same transaction, of the consumer group named
// like the transactional id, on partition 0 of the topic, whose offset is
// the write's last seqNo (metadata "weir:1:<producer>:<seqNo>"). The
// transaction commits the records and the marker atomically, so the
// marker is exactly the last seqNo in Kafka. On start the sink initializes
// the transactional id (which fences any older instance and aborts its open
// transaction), reads the marker with require_stable, and acknowledges
// without writing every message whose seqNo is at or below it.
//
// Write-ahead bound: the state the sink persists with each epoch carries
// max_distributed_seq_no, and no message above the persisted bound is
// written. So after a crash the state tells which seqNos may be in Kafka
// beyond max_persisted_seq_no. The marker is trusted if it lies in
// [max_persisted_seq_no, max_distributed_seq_no]; if it is missing while
// the bound says messages may be committed (the group was deleted, or its
// offsets expired), or does not match, the sink stops with an error rather
// than write possible duplicates (allow_missing_progress_marker overrides).
//
// At-least-once (delivery_guarantee = at_least_once): an idempotent
// producer without transactions; retries within a session are deduplicated
// by Kafka, but a restart writes again what the previous life wrote and
// did not record.
type Sink struct {
	base   *connector.OrderedAsyncSink
	params *SinkParams
	conn   *conn
	opts   Options
	path   string
	eo     bool
	header string

	sc connector.SinkContext
	tw *txnWriter
	iw *idemWriter

	// Job goroutine only.
	curBase   []byte // the base's latest state encoding
	baseSaved bool   // the base saved state in the current Sync
	lastID    msgid.ID
	lastSeq   connector.SeqNo // mirrors the base's last distributed seqNo
	loaded    loadedState
	started   bool // exactly-once start-up done (marker checked)

	mu           sync.Mutex
	ready        bool            // writes may start (exactly-once start-up done)
	durableBound connector.SeqNo // max_distributed_seq_no in the committed state
	savingBound  connector.SeqNo // in the transaction being committed
	wantBound    connector.SeqNo // a write waits for this bound
	boundCh      chan struct{}   // closed when durableBound or ready changes
	fatal        error
}

// loadedState is the sink state found at Init.
type loadedState struct {
	producer   connector.ProducerID
	persistID  msgid.ID
	persistSeq connector.SeqNo
	bound      connector.SeqNo
	found      bool
}

// NewSink builds a KafkaSink. It checks the parameters and does not
// connect (the engine builds one instance just to check them).
func NewSink(sp connector.SinkParams, o Options) (*Sink, error) {
	p, c, err := sinkSetup(sp, o)
	if err != nil {
		return nil, err
	}
	s := &Sink{params: p, conn: c, opts: o, path: sp.Path, eo: p.DeliveryGuarantee == ExactlyOnce,
		header: p.messageIDHeader(), boundCh: make(chan struct{})}
	var w connector.AsyncWriter
	if s.eo {
		s.tw = &txnWriter{s: s}
		w = s.tw
	} else {
		s.iw = &idemWriter{s: s}
		w = s.iw
	}
	s.base = connector.NewOrderedAsyncSink(w)
	s.base.MaxBatch = p.MaxMessagesPerTransaction
	return s, nil
}

func sinkSetup(sp connector.SinkParams, o Options) (*SinkParams, *conn, error) {
	if sp.AtMostOnce != nil && sp.AtMostOnce.Enabled {
		return nil, nil, fmt.Errorf("%s.at_most_once_strategy: the Kafka sinks do not support at-most-once delivery; remove it", sp.Path)
	}
	path := sp.Path + ".parameters"
	p, err := ParseSinkParams(path, sp.Parameters)
	if err != nil {
		return nil, nil, err
	}
	c, err := p.resolve(path, &o)
	if err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

// Init loads the sink state and starts the base's delivery loop. It does
// not connect: the exactly-once start-up (fencing, marker) runs in the
// first Sync that has messages to write, before the write-ahead bound is
// first raised (see startup).
func (s *Sink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.sc = sc
	raw, err := sc.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("kafka sink %s: load state: %w", sc.SinkID, err)
	}
	var baseBytes []byte
	if raw != nil {
		var bound connector.SeqNo
		if baseBytes, bound, err = decodeSinkState(raw); err != nil {
			return fmt.Errorf("kafka sink %s: state: %w", sc.SinkID, err)
		}
		ls, err := decodeBaseState(baseBytes)
		if err != nil {
			return fmt.Errorf("kafka sink %s: state: %w", sc.SinkID, err)
		}
		ls.bound, ls.found = max(bound, ls.persistSeq), true
		s.loaded = ls
	}
	wrapped := sc
	wrapped.LoadState = func(context.Context) ([]byte, error) { return baseBytes, nil }
	wrapped.SaveState = func(_ *store.Txn, b []byte) {
		s.curBase = append([]byte(nil), b...)
		s.baseSaved = true
	}
	if err := s.base.Init(ctx, wrapped); err != nil {
		return err
	}
	if !s.loaded.found {
		s.loaded.producer = s.base.Producer()
	}
	s.curBase = baseBytes
	s.lastID, s.lastSeq = s.loaded.persistID, s.loaded.persistSeq
	s.durableBound = s.loaded.bound
	if !s.eo {
		s.ready = true
		cl, err := kgo.NewClient(s.clientOpts()...)
		if err != nil {
			return fmt.Errorf("kafka sink %s: client: %w", sc.SinkID, err)
		}
		s.iw.cl = cl
	} else {
		s.tw.txnID = s.params.TransactionalIDPrefix + string(s.loaded.producer)
	}
	return nil
}

func (s *Sink) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	o := append(s.conn.opts(), s.params.producerOpts()...)
	return append(append(o, s.opts.ClientOpts...), extra...)
}

// Producer returns the sink's producer id (after Init).
func (s *Sink) Producer() connector.ProducerID { return s.loaded.producer }

// TransactionalID returns the exactly-once sink's transactional id, which
// is also its progress marker's consumer group ("" in at_least_once mode).
func (s *Sink) TransactionalID() string {
	if s.tw == nil {
		return ""
	}
	return s.tw.txnID
}

// Distribute hands m to the base, mirroring its seqNo assignment: a message
// above the last distributed id gets the next seqNo.
func (s *Sink) Distribute(m *weir.Message, done func(error)) {
	if m.ID > s.lastID {
		s.lastID = m.ID
		s.lastSeq++
	}
	s.base.Distribute(m, done)
}

// Sync records in txn the writes Kafka accepted since the last Sync and,
// exactly-once, raises the write-ahead bound to every seqNo distributed so
// far (the messages that Commit will hand to the writer). A sink stopped by
// a fatal error (fenced, marker missing, a message it cannot encode)
// returns it, failing the epoch: the job restarts with a new instance.
func (s *Sink) Sync(ctx context.Context, txn *store.Txn) error {
	if err := s.Failure(); err != nil {
		return err
	}
	if s.eo && !s.started && s.lastSeq > s.loaded.persistSeq {
		if err := s.startup(ctx); err != nil {
			return err
		}
	}
	s.baseSaved = false
	if err := s.base.Sync(ctx, txn); err != nil {
		return err
	}
	s.mu.Lock()
	bound := s.durableBound
	raise := s.eo && s.lastSeq > bound
	if raise {
		bound = s.lastSeq
	}
	s.mu.Unlock()
	if (s.baseSaved || raise) && s.curBase != nil {
		s.sc.SaveState(txn, encodeSinkState(s.curBase, bound))
		if raise {
			s.mu.Lock()
			s.savingBound = bound
			s.mu.Unlock()
		}
	}
	return nil
}

// Commit runs after the epoch commit: the bound recorded by it becomes
// durable (so writes up to it may start), then the base acknowledges what
// the commit recorded and hands new messages to the writer.
func (s *Sink) Commit(ctx context.Context) {
	s.mu.Lock()
	if s.savingBound > s.durableBound {
		s.durableBound = s.savingBound
		s.wakeLocked()
	}
	s.mu.Unlock()
	s.base.Commit(ctx)
}

func (s *Sink) wakeLocked() {
	close(s.boundCh)
	s.boundCh = make(chan struct{})
}

// PendingSync implements connector.PendingSyncer: the base has progress to
// record, a write waits for the bound, or a fatal error must fail the job.
func (s *Sink) PendingSync() bool {
	s.mu.Lock()
	want := s.wantBound > s.durableBound || s.fatal != nil
	s.mu.Unlock()
	return want || s.base.PendingSync()
}

// Failure returns the error that stopped the sink, if any: a fatal one of
// this sink (fenced, marker, encoding) or the base's.
func (s *Sink) Failure() error {
	s.mu.Lock()
	err := s.fatal
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.base.Failure()
}

// Pending returns how many messages wait to be written or recorded.
func (s *Sink) Pending() int { return s.base.Pending() }

func (s *Sink) setFatal(err error) error {
	s.mu.Lock()
	if s.fatal == nil {
		s.fatal = err
	}
	err = s.fatal
	s.mu.Unlock()
	s.sc.Logf("%v", err)
	return err
}

// Close stops the delivery loop and closes the clients. Unrecorded
// messages stay in the outbox; an open transaction is aborted by the next
// instance's start-up (or by Kafka's transaction timeout).
func (s *Sink) Close() error {
	err := s.base.Close()
	if s.tw != nil {
		s.tw.close()
	}
	if s.iw != nil && s.iw.cl != nil {
		s.iw.cl.Close()
	}
	return err
}

// waitWritable blocks until the exactly-once start-up is done and the
// durable bound covers last (the write-ahead rule), or ctx ends.
func (s *Sink) waitWritable(ctx context.Context, last connector.SeqNo) error {
	for {
		s.mu.Lock()
		if s.ready && s.durableBound >= last {
			s.mu.Unlock()
			return nil
		}
		s.wantBound = max(s.wantBound, last)
		ch := s.boundCh
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// startup connects the exactly-once writer and checks the progress marker
// against the loaded state. It runs before the write-ahead bound is first
// raised by this instance, so durableBound is still the loaded bound.
func (s *Sink) startup(ctx context.Context) error {
	w := s.tw
	if err := w.open(ctx); err != nil {
		return fmt.Errorf("kafka sink %s: start transactional producer %s: %w", s.sc.SinkID, w.txnID, err)
	}
	mk, err := w.fetchMarker(ctx)
	if err != nil {
		return fmt.Errorf("kafka sink %s: read progress marker of %s: %w", s.sc.SinkID, w.txnID, err)
	}
	persist, bound := s.loaded.persistSeq, s.durableBound
	var problem string
	switch {
	case mk.found && mk.valid && persist <= mk.seq && mk.seq <= bound:
		w.marker = mk.seq
	case !mk.found && bound <= persist:
		// Nothing can be in Kafka beyond what the state records: start the
		// marker there, before any write, so that a later life finds it.
		if err := w.commitInitialMarker(ctx, persist); err != nil {
			return fmt.Errorf("kafka sink %s: commit initial progress marker of %s: %w", s.sc.SinkID, w.txnID, err)
		}
		w.marker = persist
	case !mk.found:
		problem = fmt.Sprintf("progress marker missing: consumer group %q has no committed offset on topic %s partition 0, while this sink's state says messages with seqNo in (%d, %d] may already be committed to Kafka",
			w.txnID, s.params.Topic, persist, bound)
	case !mk.valid:
		problem = fmt.Sprintf("progress marker of consumer group %q on topic %s partition 0 is not this sink's (offset %d, metadata %q; want metadata \"weir:1:%s:<seqNo>\")",
			w.txnID, s.params.Topic, mk.seq, mk.meta, s.loaded.producer)
	default:
		problem = fmt.Sprintf("progress marker of consumer group %q says seqNo %d is committed to Kafka, outside [%d, %d] that this sink's state allows (was the sink state or the group restored from elsewhere?)",
			w.txnID, mk.seq, persist, bound)
	}
	if problem != "" {
		if !s.params.AllowMissingProgressMarker {
			err := fmt.Errorf("kafka sink %s: %s; writing them again could duplicate them, so the sink stops. Check the topic for those messages (header %q) and, to resume at-least-once for them, set allow_missing_progress_marker = %%true: %w",
				s.sc.SinkID, problem, s.header, ErrMarkerLost)
			if s.opts.Fatal != nil {
				s.opts.Fatal(err)
			}
			return err
		}
		s.sc.Logf("%s; allow_missing_progress_marker is set: writing from seqNo %d again (messages up to %d may be duplicated)", problem, persist+1, bound)
		if err := w.commitInitialMarker(ctx, persist); err != nil {
			return fmt.Errorf("kafka sink %s: commit progress marker of %s: %w", s.sc.SinkID, w.txnID, err)
		}
		w.marker = persist
	}
	s.started = true
	s.mu.Lock()
	s.ready = true
	s.wakeLocked()
	s.mu.Unlock()
	return nil
}

// ErrMarkerLost is wrapped by the error of an exactly-once sink that stops
// because its progress marker is missing or does not match its state.
var ErrMarkerLost = errors.New("kafka sink progress marker lost")

// ErrFenced is wrapped by the error of an exactly-once sink whose
// transactional id was initialized by a newer instance (the zombie's
// transaction fails; nothing of it becomes visible to read_committed).
var ErrFenced = errors.New("kafka sink fenced by a newer instance")

// fencedErr reports whether err says this producer's identity is no
// longer valid: another instance initialized the transactional id
// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH; a fenced commit may also be
// answered INVALID_TXN_STATE), or the id expired or lost its
// authorization. Such an instance never writes again and never
// re-initializes the id itself: its Sync fails, its job restarts, and the
// new instance re-initializes (fencing in turn whoever is older).
func fencedErr(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidTxnState)
}

// record builds m's Kafka record. Errors are permanent (the message's
// payload is not writable as configured).
func (s *Sink) record(m *weir.Message) (*kgo.Record, error) {
	r := &kgo.Record{Topic: s.params.Topic}
	if col := s.params.KeyColumn; col != "" {
		k, err := bytesOf(m.Payload[col])
		if err != nil {
			return nil, fmt.Errorf("message %s: key_column %q: %w", m.ID, col, err)
		}
		r.Key = k
	}
	if col := s.params.PayloadColumn; col != "" {
		switch v := m.Payload[col].(type) {
		case nil:
		case string:
			r.Value = []byte(v)
		case []byte:
			r.Value = v
		default:
			return nil, fmt.Errorf("message %s: payload_column %q holds %T, want a string or bytes", m.ID, col, v)
		}
	} else {
		b, err := codec.AppendRowJSON(nil, m.Payload)
		if err != nil {
			return nil, fmt.Errorf("message %s: encode the row as JSON: %w", m.ID, err)
		}
		r.Value = b
	}
	if s.header != "" {
		r.Headers = []kgo.RecordHeader{{Key: s.header, Value: []byte(hex.EncodeToString([]byte(m.ID)))}}
	}
	return r, nil
}

// bytesOf turns a key column value into key bytes: strings and bytes as
// they are, other scalars as text, null as no key.
func bytesOf(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	case float64:
		return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
	case bool:
		return strconv.AppendBool(nil, x), nil
	}
	return nil, fmt.Errorf("a %T cannot be a record key; use a string, bytes or scalar column", v)
}

// idemWriter is the at-least-once writer: an idempotent producer without
// transactions.
type idemWriter struct {
	s  *Sink
	cl *kgo.Client
}

// Write produces msgs and waits for their acknowledgements; it returns the
// acknowledged prefix.
func (w *idemWriter) Write(ctx context.Context, _ connector.ProducerID, _ connector.SeqNo, msgs []*weir.Message) (int, error) {
	if err := w.s.Failure(); err != nil {
		return 0, err
	}
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r, err := w.s.record(m)
		if err != nil {
			return 0, w.s.setFatal(fmt.Errorf("kafka sink %s: %w", w.s.sc.SinkID, err))
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	if i, err := produceAll(ctx, w.cl, recs); err != nil {
		return i, fmt.Errorf("produce to %s: %w", w.s.params.Topic, err)
	}
	return len(msgs), nil
}

// produceAll produces recs, waits for every acknowledgement and returns
// the index of the first record that failed (len(recs) if none) with its
// error.
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (int, error) {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for i, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return i, err
		}
	}
	return len(recs), nil
}
