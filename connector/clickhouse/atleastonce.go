package clickhouse

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
)

// AtLeastOnceSink is AtLeastOnceClickHouseSink: a connector.SyncSink whose
// writer INSERTs the epoch's messages during Sync, before the epoch
// commits, without the outbox and without a deduplication token (and with
// insert_deduplicate = 0, so that a batch equal to an earlier one is not
// dropped). A failed write fails the epoch, so nothing is lost; a write
// that succeeded in an epoch that then does not commit is written again by
// the next life (duplicates).
type AtLeastOnceSink struct {
	*connector.SyncSink
	w *writer
	p *Params
}

// NewAtLeastOnceSink builds an AtLeastOnceClickHouseSink (host or hosts).
func NewAtLeastOnceSink(sp connector.SinkParams, o Options) (*AtLeastOnceSink, error) {
	if err := rejectAtMostOnce(sp); err != nil {
		return nil, err
	}
	p, shards, err := parseParams(sp.Path+".parameters", sp.Parameters, targetHosts, o.getenv())
	if err != nil {
		return nil, err
	}
	s := &AtLeastOnceSink{p: p, w: newWriter(sp.SinkID, p, shards, modeAtLeastOnce, o)}
	s.SyncSink = connector.NewSyncSink(s)
	return s, nil
}

// Init starts the instance (the writer session starts with the first write).
func (s *AtLeastOnceSink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.w.start(sc)
	return s.SyncSink.Init(ctx, sc)
}

// Write implements connector.SyncWriter: the epoch's messages in INSERTs of
// at most max_batch_rows rows, each retried as the error classification
// says. An error fails the epoch.
func (s *AtLeastOnceSink) Write(ctx context.Context, _ *store.Txn, msgs []*weir.Message) error {
	for len(msgs) > 0 {
		n := min(len(msgs), s.p.MaxBatchRows)
		if err := s.w.insert(ctx, 0, msgs[:n], ""); err != nil {
			return fmt.Errorf("clickhouse sink %s: %w", s.w.sinkID, err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// Reconfigure applies dynamic parameters (see Dynamic).
func (s *AtLeastOnceSink) Reconfigure(d Dynamic) error { return s.w.reconfigure(d) }

// Close closes the transports.
func (s *AtLeastOnceSink) Close() error {
	s.w.close()
	return s.SyncSink.Close()
}
