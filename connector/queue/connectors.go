package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// Register adds QueueSource, SyncQueueSink and AsyncQueueSink to r.
func Register(r *connector.Registry) error {
	return errors.Join(
		r.RegisterSource("QueueSource", NewSource),
		r.RegisterSink("SyncQueueSink", NewSyncSink),
		r.RegisterSink("AsyncQueueSink", NewAsyncSink),
	)
}

// SourceParams are QueueSource's parameters.
type SourceParams struct {
	// QueuePath names the queue to read (required).
	QueuePath string `yson:"queue_path,required"`
	// ConsumerPath names the consumer whose offsets the source reports for
	// lag tools (required; created on first run). The pipeline's own position
	// lives in its partition state, not in the consumer.
	ConsumerPath string `yson:"consumer_path,required"`
	// Finite: the queue is complete; reaching the end of every partition
	// lets the pipeline complete (default false).
	Finite bool `yson:"finite"`
}

// Source reads a queue (QueueSource): one source partition per queue
// partition, exactly-once because offsets advance only with the epoch
// commit.
type Source struct {
	q      *Queue
	params SourceParams
}

// NewSource is QueueSource's factory. A missing queue is an error naming it;
// the consumer is registered if new.
func NewSource(p connector.SourceParams) (connector.Source, error) {
	var sp SourceParams
	if err := spec.DecodeParameters(p.Path+".parameters", p.Parameters, &sp); err != nil {
		return nil, err
	}
	ctx := context.Background()
	q, err := Open(ctx, p.Store, sp.QueuePath)
	if err != nil {
		return nil, fmt.Errorf("%s.parameters.queue_path: %w", p.Path, err)
	}
	if err := q.RegisterConsumer(ctx, sp.ConsumerPath); err != nil {
		return nil, fmt.Errorf("%s.parameters.consumer_path: %w", p.Path, err)
	}
	return &Source{q: q, params: sp}, nil
}

// Partitions implements connector.Source.
func (s *Source) Partitions(context.Context) ([]string, error) {
	keys := make([]string, s.q.partitions)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys, nil
}

// Open implements connector.Source.
func (s *Source) Open(_ context.Context, key string) (connector.SourcePartition, error) {
	p, err := strconv.Atoi(key)
	if err != nil || s.q.checkPartition(p) != nil {
		return nil, fmt.Errorf("queue %s has no partition %q", s.q.name, key)
	}
	return &sourcePartition{s: s, p: p, key: s.q.name + "/" + key}, nil
}

// Close implements connector.Source.
func (s *Source) Close() error { return nil }

type sourcePartition struct {
	s   *Source
	p   int
	key string
	// seen is the partition's end known before the last Read that found
	// its end (0: none): Readable wakes the job once the end passes it, not
	// for rows below it that the Read did not find (deleted ones).
	seen uint64
}

func (sp *sourcePartition) Key() string  { return sp.key }
func (sp *sourcePartition) Finite() bool { return sp.s.params.Finite }
func (sp *sourcePartition) Close() error { return nil }

func (sp *sourcePartition) Read(ctx context.Context, from connector.Offset, maxRows, maxBytes int) (connector.Batch, error) {
	end, known := sp.s.q.tail(sp.p)
	rows, err := sp.s.q.read(ctx, sp.p, uint64(from), maxRows, end, known)
	if err != nil {
		return connector.Batch{}, err
	}
	if known && len(rows) < maxRows {
		sp.seen = end
	}
	b := connector.Batch{Next: from, Records: make([]connector.Record, 0, len(rows))}
	bytes := 0
	for _, r := range rows {
		size := 64 + r.Size
		if len(b.Records) > 0 && bytes+size > maxBytes {
			break
		}
		bytes += size
		b.Records = append(b.Records, connector.Record{
			Offset: connector.Offset(r.Index), WriteTimestamp: r.Timestamp, Row: r.Row, Size: size,
		})
		b.Next = connector.Offset(r.Index + 1)
	}
	b.End = len(rows) < maxRows
	return b, nil
}

// closed is a channel that is always closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Readable implements connector.ReadNotifier on a store that knows its
// sequences' ends (store.SequenceTails: the embedded store, through which
// every write of the queue passes).
func (sp *sourcePartition) Readable(from connector.Offset) <-chan struct{} {
	end, grew, ok := sp.s.q.watch(sp.p)
	switch {
	case !ok:
		return nil
	case end > max(uint64(from), sp.seen):
		return closed
	default:
		return grew
	}
}

// ReportInTxn implements connector.TxnReporter: the consumer's offset
// commits with the pipeline's position, in the same store (a source's
// store is the pipeline's), instead of in a checked commit of its own after
// every epoch.
func (sp *sourcePartition) ReportInTxn(txn *store.Txn, next connector.Offset) {
	txn.Put(store.Consumers, sp.s.q.consumerKey(sp.s.params.ConsumerPath, sp.p), binary.BigEndian.AppendUint64(nil, uint64(next)))
}

func (sp *sourcePartition) ReportCommitted(ctx context.Context, next connector.Offset) error {
	return sp.s.q.CommitConsumer(ctx, sp.s.params.ConsumerPath, sp.p, uint64(next))
}

func (q *Queue) consumerKey(consumer string, p int) []byte {
	b := append(append(append([]byte(q.name), 0), consumer...), 0)
	if p < 0 {
		return b[:len(b)-1]
	}
	return binary.BigEndian.AppendUint32(b, uint32(p))
}

// RegisterConsumer creates consumer if new (idempotent).
func (q *Queue) RegisterConsumer(ctx context.Context, consumer string) error {
	if consumer == "" {
		return errors.New("empty consumer name")
	}
	if _, ok, err := q.st.Get(ctx, store.Consumers, q.consumerKey(consumer, -1)); err != nil || ok {
		return err
	}
	txn := store.NewTxn()
	txn.Put(store.Consumers, q.consumerKey(consumer, -1), []byte{1})
	return q.st.Commit(ctx, txn)
}

// CommitConsumer raises consumer's committed offset of partition p to next.
// The offset only moves forward: it is written after the pipeline's epoch
// commit and without its lease, so a zombie job reporting late must not
// move it back. The read and the conditional write are retried while
// another writer moves the row between them.
func (q *Queue) CommitConsumer(ctx context.Context, consumer string, p int, next uint64) error {
	key := q.consumerKey(consumer, p)
	for {
		cur, ok, err := q.st.Get(ctx, store.Consumers, key)
		if err != nil {
			return err
		}
		txn := store.NewTxn()
		if ok {
			if len(cur) == 8 && binary.BigEndian.Uint64(cur) >= next {
				return nil
			}
			txn.CheckValue(store.Consumers, key, cur)
		} else {
			txn.CheckAbsent(store.Consumers, key)
		}
		txn.Put(store.Consumers, key, binary.BigEndian.AppendUint64(nil, next))
		err = q.st.Commit(ctx, txn)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// ConsumerOffsets returns consumer's committed offset per partition.
func (q *Queue) ConsumerOffsets(ctx context.Context, consumer string) ([]uint64, error) {
	out := make([]uint64, q.partitions)
	for p := range out {
		v, ok, err := q.st.Get(ctx, store.Consumers, q.consumerKey(consumer, p))
		if err != nil {
			return nil, err
		}
		if ok && len(v) == 8 {
			out[p] = binary.BigEndian.Uint64(v)
		}
	}
	return out, nil
}

// SinkParams are the parameters of SyncQueueSink and AsyncQueueSink.
type SinkParams struct {
	// QueuePath names the target queue (required; it must exist).
	QueuePath string `yson:"queue_path,required"`
	// KeyColumn routes rows: a row goes to the partition of the hash of this
	// column (default "key"); rows without it are spread by message id.
	KeyColumn string `yson:"key_column"`
	// DataDir (AsyncQueueSink only) names another weir data directory that
	// holds the queue; empty means the pipeline's own store.
	DataDir string `yson:"data_dir"`
	// ProducerPath (AsyncQueueSink only) is accepted for Flow compatibility;
	// the producer id is generated per partition and persisted.
	ProducerPath string `yson:"producer_path"`
}

// SetDefaults implements spec.Defaulter: key_column defaults to "key".
func (p *SinkParams) SetDefaults() {
	if p.KeyColumn == "" {
		p.KeyColumn = "key"
	}
}

func decodeSinkParams(p connector.SinkParams) (SinkParams, error) {
	var sp SinkParams
	err := spec.DecodeParameters(p.Path+".parameters", p.Parameters, &sp)
	return sp, err
}

// syncWriter appends a sync sink's messages to the queue in the epoch
// transaction.
type syncWriter struct {
	q   *Queue
	key string
}

func (w syncWriter) Write(_ context.Context, txn *store.Txn, msgs []*weir.Message) error {
	// One buffer for the epoch's rows (see Queue.encodeRow).
	buf := make([]byte, 0, 64*len(msgs))
	for _, m := range msgs {
		// PartitionOf, without converting the id unless the row has no key.
		h, ok := keyHash(m.Payload, w.key)
		if !ok {
			h = codec.Hash64([]byte(m.ID))
		}
		p := int(h % uint64(w.q.partitions))
		if err := w.q.checkPartition(p); err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
		var v []byte
		var err error
		if buf, v, err = w.q.encodeRow(buf, m.Payload); err != nil {
			return fmt.Errorf("message %s: queue %s: %w", m.ID, w.q.name, err)
		}
		txn.Append(store.QueueRows, w.q.rowPrefix(p), v)
	}
	return nil
}

// NewSyncSink is SyncQueueSink's factory: rows are written inside the
// epoch transaction (exactly-once; the queue must be in the pipeline's
// store).
func NewSyncSink(p connector.SinkParams) (connector.Sink, error) {
	sp, err := decodeSinkParams(p)
	if err != nil {
		return nil, err
	}
	if sp.DataDir != "" {
		return nil, fmt.Errorf("%s.parameters.data_dir: SyncQueueSink writes inside the epoch transaction, so its queue must be in the pipeline's own store; use AsyncQueueSink for a queue in another data directory", p.Path)
	}
	if p.AtMostOnce != nil && p.AtMostOnce.Enabled {
		return nil, fmt.Errorf("%s.at_most_once_strategy: SyncQueueSink is synchronous; at_most_once_strategy applies only to AsyncQueueSink", p.Path)
	}
	q, err := Open(context.Background(), p.Store, sp.QueuePath)
	if err != nil {
		return nil, fmt.Errorf("%s.parameters.queue_path: %w", p.Path, err)
	}
	return connector.NewSyncSink(syncWriter{q: q, key: sp.KeyColumn}), nil
}

// producerWriter writes an async sink's messages as a queue producer.
type producerWriter struct {
	q   *Queue
	key string
}

func (w producerWriter) Write(ctx context.Context, producer connector.ProducerID, first connector.SeqNo, msgs []*weir.Message) (int, error) {
	rows := make([]weir.Row, len(msgs))
	parts := make([]int, len(msgs))
	for i, m := range msgs {
		rows[i] = m.Payload
		parts[i] = PartitionOf(m.Payload, w.key, w.q.partitions, []byte(m.ID))
	}
	if _, err := w.q.WriteAsProducer(ctx, string(producer), uint64(first), rows, parts); err != nil {
		return 0, err
	}
	return len(msgs), nil
}

// NewAsyncSink is AsyncQueueSink's factory: outputs go through the outbox
// and are written after the epoch commit as a producer with sequence
// numbers, so the queue drops repeats (exactly-once). With
// at_most_once_strategy enabled, messages go through a bounded in-memory
// queue instead and overflow is dropped (at-most-once).
func NewAsyncSink(p connector.SinkParams) (connector.Sink, error) {
	sp, err := decodeSinkParams(p)
	if err != nil {
		return nil, err
	}
	st := p.Store
	if sp.DataDir != "" {
		st, err = SharedStore(sp.DataDir)
		if err != nil {
			return nil, fmt.Errorf("%s.parameters.data_dir: %w", p.Path, err)
		}
	}
	q, err := Open(context.Background(), st, sp.QueuePath)
	if err != nil {
		return nil, fmt.Errorf("%s.parameters.queue_path: %w", p.Path, err)
	}
	w := producerWriter{q: q, key: sp.KeyColumn}
	if p.AtMostOnce != nil && p.AtMostOnce.Enabled {
		return connector.NewAtMostOnceSink(w, *p.AtMostOnce), nil
	}
	return connector.NewOrderedAsyncSink(w), nil
}

// OpenStore opens a weir data directory's store; the engine sets it so that
// AsyncQueueSink can reach queues in other data directories.
var OpenStore func(dir string) (store.Store, error)

var (
	sharedMu     sync.Mutex
	sharedStores = map[string]store.Store{}
)

// SharedStore returns the process-wide handle of the store in dir, opening
// it on first use (a store directory can be opened once per process).
func SharedStore(dir string) (store.Store, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if st, ok := sharedStores[dir]; ok {
		return st, nil
	}
	if OpenStore == nil {
		return nil, errors.New("no store opener configured for other data directories")
	}
	st, err := OpenStore(dir)
	if err != nil {
		return nil, err
	}
	sharedStores[dir] = st
	return st, nil
}

// CloseSharedStores closes the stores opened by SharedStore.
func CloseSharedStores() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var errs []error
	for dir, st := range sharedStores {
		errs = append(errs, st.Close())
		delete(sharedStores, dir)
	}
	return errors.Join(errs...)
}
