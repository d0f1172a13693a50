package connector

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// SyncWriter adds a batch of messages to an epoch transaction (for example
// rows appended to a queue in the same store).
type SyncWriter interface {
	Write(ctx context.Context, txn *store.Txn, msgs []*weir.Message) error
}

// SyncSink is the base of synchronous sinks (Flow's TSyncSinkBase): outputs
// are written inside the epoch transaction, together with the sink's state
// {max_persisted_message_id}, so the write and the acknowledgement are
// atomic — exactly-once. A message whose id is not above the persisted
// maximum was written in an earlier life of the partition and is
// acknowledged without writing.
//
// Invariant: ids distributed to one instance strictly increase (the engine
// distributes a partition's outputs in id order).
type SyncSink struct {
	W SyncWriter

	sc      SinkContext
	maxID   msgid.ID
	queued  []*weir.Message
	changed bool
	// last is the last id distributed to this instance (checked under
	// invariants: ids strictly increase).
	last msgid.ID
}

// NewSyncSink returns a sync sink writing through w.
func NewSyncSink(w SyncWriter) *SyncSink { return &SyncSink{W: w} }

// Init loads the persisted maximum id.
func (s *SyncSink) Init(ctx context.Context, sc SinkContext) error {
	s.sc = sc
	b, err := sc.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("sync sink %s: load state: %w", sc.SinkID, err)
	}
	s.maxID = msgid.ID(b)
	return nil
}

// Distribute queues m for this epoch's transaction and acknowledges it: the
// acknowledgement takes effect only if the transaction commits.
func (s *SyncSink) Distribute(m *weir.Message, done func(error)) {
	invariants.Check(s.last == "" || m.ID > s.last, "sync sink %s of %s: id %s distributed after %s", s.sc.SinkID, s.sc.PartitionID, m.ID, s.last)
	s.last = m.ID
	if m.ID <= s.maxID {
		done(nil)
		return
	}
	s.maxID = m.ID
	s.changed = true
	s.queued = append(s.queued, m)
	done(nil)
}

// DeliversInline implements InlineDelivery: Distribute acknowledges every
// message before it returns.
func (s *SyncSink) DeliversInline() bool { return true }

// Sync writes the queued messages and the new maximum into txn.
func (s *SyncSink) Sync(ctx context.Context, txn *store.Txn) error {
	if len(s.queued) > 0 {
		if err := s.W.Write(ctx, txn, s.queued); err != nil {
			return err
		}
	}
	if s.changed {
		s.sc.SaveState(txn, []byte(s.maxID))
	}
	s.queued = s.queued[:0]
	s.changed = false
	return nil
}

// Commit does nothing: the writes were part of the epoch commit.
func (s *SyncSink) Commit(context.Context) {}

// Close does nothing.
func (s *SyncSink) Close() error { return nil }
