package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
)

// AtLeastOnceSink is AtLeastOnceKafkaSink (Flow's TAtLeastOnceKafkaSink): a
// connector.SyncSink whose writer produces an epoch's records and waits for
// Kafka to acknowledge all of them during Sync, before the epoch commits.
// A failed or unacknowledged write fails the epoch, so nothing is lost; if
// the epoch then fails to commit after a successful write, the next life
// writes the same records again (duplicates). Each instance has its own
// idempotent producer (a fresh producer id per Init), which deduplicates
// retries within the instance only.
type AtLeastOnceSink struct {
	*connector.SyncSink
	params *SinkParams
	conn   *conn
	opts   Options
	w      *syncWriter
}

// NewAtLeastOnceSink builds an AtLeastOnceKafkaSink. It checks the
// parameters and does not connect. delivery_guarantee, if given, must be
// at_least_once.
func NewAtLeastOnceSink(sp connector.SinkParams, o Options) (*AtLeastOnceSink, error) {
	p, c, err := sinkSetup(sp, o)
	if err != nil {
		return nil, err
	}
	if _, ok := sp.Parameters["delivery_guarantee"]; ok && p.DeliveryGuarantee != AtLeastOnce {
		return nil, fmt.Errorf("%s.parameters.delivery_guarantee: %s is at-least-once only; remove delivery_guarantee or use %s for exactly_once", sp.Path, AtLeastOnceSinkClassName, SinkClassName)
	}
	s := &AtLeastOnceSink{params: p, conn: c, opts: o}
	s.w = &syncWriter{s: &Sink{params: p, header: p.messageIDHeader()}}
	s.SyncSink = connector.NewSyncSink(s.w)
	return s, nil
}

// Init creates the producer and loads the base's state.
func (s *AtLeastOnceSink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.w.s.sc = sc
	opts := append(s.conn.opts(), s.params.producerOpts()...)
	cl, err := kgo.NewClient(append(opts, s.opts.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka sink %s: client: %w", sc.SinkID, err)
	}
	s.w.cl = cl
	return s.SyncSink.Init(ctx, sc)
}

// Close closes the producer.
func (s *AtLeastOnceSink) Close() error {
	if s.w.cl != nil {
		s.w.cl.Close()
		s.w.cl = nil
	}
	return s.SyncSink.Close()
}

// syncWriter produces a batch and waits for its acknowledgements.
type syncWriter struct {
	s  *Sink // for record building only
	cl *kgo.Client
}

func (w *syncWriter) Write(ctx context.Context, _ *store.Txn, msgs []*weir.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r, err := w.s.record(m)
		if err != nil {
			return fmt.Errorf("kafka sink %s: %w", w.s.sc.SinkID, err)
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	if i, err := produceAll(ctx, w.cl, recs); err != nil {
		return fmt.Errorf("kafka sink %s: produce message %s to %s: %w", w.s.sc.SinkID, msgs[i].ID, w.s.params.Topic, err)
	}
	return nil
}
