package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// AtMostOnceSink is AtMostOnceClickHouseSink: each message becomes one
// INSERT, and once an INSERT has started (its request reached the
// connection), a failure is acknowledged, never retried. Failures before
// that (no connection, the writer session cannot start) are retried.
//
// Ordered mode (at_most_once_strategy absent or enabled = %false): the
// messages stay in the outbox and are sent in id order after the epoch
// commit. The sink's partition state holds a write-ahead bound ("started"):
// no INSERT of a message above the committed bound starts. When the
// delivery goroutine reaches a message above it, it asks for the bound to
// cover the next startedWindow queued messages and waits; the next epoch
// (PendingSync) writes it and its commit releases them. After a restart, a
// reloaded message at or below the bound may have started in the earlier
// life and is dropped (acknowledged without a request); one above it is
// sent. So a crash drops at most startedWindow messages whose INSERT never
// started, besides the ones that did. A message leaves the outbox once a
// later epoch recorded it done.
//
// Queue mode (enabled = %true): each message is acknowledged at once and,
// after the epoch commit, queued in memory while the queued bytes stay
// within total_queue_bytes_limit (dynamic); the rest is dropped with a
// warning. A crash loses the queue; a clean stop does not: the sink
// implements connector.Queueing, so its partition is neither quiet nor
// drained while messages are queued, and a drain or the completion of a
// finite pipeline waits until every queued INSERT was sent. Close (a job
// moved, stopped hard, or failed) waits up to suspend_destruction_duration
// for the queue and reports what it abandons. Messages reloaded from the
// outbox after a restart are not handed to it again
// (connector.AtMostOnce).
//
// Every message either mode gives up is counted in
// weir_clickhouse_sink_dropped_total by reason (queue_full, insert_failed,
// uncertain_after_restart, abandoned_at_close) and reported through
// connector.SinkContext.ReportDropped (a warning, and the computation's
// dropped outputs in the run summary and 'weir pipeline status').
type AtMostOnceSink struct {
	w       *writer
	p       *Params
	queued  bool // queue mode
	limit   atomic.Int64
	suspend time.Duration

	sc connector.SinkContext

	// Job goroutine only.
	st          startedState
	loadedBound msgid.ID
	lastID      msgid.ID
	pending     []pendingMsg // distributed this epoch

	mu       sync.Mutex
	durable  msgid.ID      // the committed started bound
	want     msgid.ID      // the bound the loop waits for
	saving   bool          // Sync wrote st.Started; Commit makes it durable
	boundCh  chan struct{} // closed when durable moves
	queue    []pendingMsg  // handed to the loop
	finished []pendingMsg  // done (inserted or dropped), to record
	record   []pendingMsg  // recorded by the transaction now committing
	qbytes   int64
	fatal    error
	kick     chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
}

// NewAtMostOnceSink builds an AtMostOnceClickHouseSink (host or hosts).
func NewAtMostOnceSink(sp connector.SinkParams, o Options) (*AtMostOnceSink, error) {
	p, shards, err := parseParams(sp.Path+".parameters", sp.Parameters, targetHosts, o.getenv())
	if err != nil {
		return nil, err
	}
	s := &AtMostOnceSink{p: p, w: newWriter(sp.SinkID, p, shards, modeAtMostOnce, o)}
	if a := sp.AtMostOnce; a != nil && a.Enabled {
		if a.TotalQueueBytesLimit <= 0 {
			return nil, fmt.Errorf("%s.at_most_once_strategy.total_queue_bytes_limit: must be positive, got %d", sp.Path, a.TotalQueueBytesLimit)
		}
		s.queued, s.suspend = true, a.SuspendDestructionDuration
		s.limit.Store(a.TotalQueueBytesLimit)
	}
	return s, nil
}

// Init loads the ordered mode's state and starts the delivery goroutine.
func (s *AtMostOnceSink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.sc = sc
	s.w.start(sc)
	if !s.queued {
		raw, err := sc.LoadState(ctx)
		if err != nil {
			return fmt.Errorf("clickhouse sink %s: load state: %w", sc.SinkID, err)
		}
		if raw != nil {
			if s.st, err = decodeStartedState(raw); err != nil {
				return fmt.Errorf("clickhouse sink %s: %w", sc.SinkID, err)
			}
		}
		s.loadedBound, s.lastID, s.durable = s.st.Started, s.st.Acked, s.st.Started
	}
	s.kick = make(chan struct{}, 1)
	s.boundCh = make(chan struct{})
	s.done = make(chan struct{})
	lctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(lctx)
	return nil
}

// startedWindow is how many queued messages one raise of the started bound
// covers: more means fewer epochs spent on the bound, and more messages
// dropped (never sent) after a crash.
const startedWindow = 16

// Distribute: in queue mode m is acknowledged at once; in ordered mode it
// waits for the commit (or, if an earlier life may have started its
// INSERT, is dropped).
func (s *AtMostOnceSink) Distribute(m *weir.Message, done func(error)) {
	if s.queued {
		done(nil)
		s.pending = append(s.pending, pendingMsg{m: m})
		return
	}
	if !admit(s.sc.SinkID, s.st.Acked, &s.lastID, m, done) {
		return
	}
	if m.ID <= s.loadedBound {
		s.drop(dropUncertain, 1, fmt.Sprintf("message %s: an earlier life may have started its INSERT", m.ID))
		done(nil)
		return
	}
	s.pending = append(s.pending, pendingMsg{m: m, done: done})
}

// Sync (ordered mode) records the messages done since the last Sync and
// raises the write-ahead bound to what the delivery goroutine asked for.
func (s *AtMostOnceSink) Sync(_ context.Context, txn *store.Txn) error {
	s.mu.Lock()
	fatal := s.fatal
	s.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if s.queued {
		return nil
	}
	s.mu.Lock()
	changed := false
	if len(s.finished) > 0 {
		s.st.Acked = s.finished[len(s.finished)-1].m.ID
		s.record = append(s.record, s.finished...)
		s.finished = nil
		changed = true
	}
	if s.want > s.st.Started {
		s.st.Started, s.saving = s.want, true
		changed = true
	}
	s.mu.Unlock()
	if changed {
		s.sc.SaveState(txn, s.st.encode())
	}
	return nil
}

// Commit hands this epoch's messages to the delivery goroutine (ordered:
// the bound covering them is now durable; queue: within the byte limit)
// and acknowledges what the commit recorded.
func (s *AtMostOnceSink) Commit(context.Context) {
	s.mu.Lock()
	rec := s.record
	s.record = nil
	dropped := 0
	if s.queued {
		limit := s.limit.Load()
		for _, pm := range s.pending {
			size := int64(messageSize(pm.m))
			if s.qbytes+size > limit {
				dropped++
				continue
			}
			s.qbytes += size
			s.queue = append(s.queue, pm)
		}
	} else {
		s.queue = append(s.queue, s.pending...)
		if s.saving {
			s.durable, s.saving = s.st.Started, false
			close(s.boundCh)
			s.boundCh = make(chan struct{})
		}
	}
	s.pending = nil
	s.mu.Unlock()
	if dropped > 0 {
		s.drop(dropQueueFull, dropped, fmt.Sprintf("the queue is full (total_queue_bytes_limit %d)", s.limit.Load()))
	}
	for _, pm := range rec {
		pm.done(nil)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// PendingSync implements connector.PendingSyncer (ordered mode): reloaded
// messages wait for a commit, the delivery goroutine waits for the bound,
// or done messages wait to be recorded.
func (s *AtMostOnceSink) PendingSync() bool {
	if !s.queued && len(s.pending) > 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal != nil || len(s.finished) > 0 || s.want > s.durable
}

// awaitBound blocks until the committed started bound covers id, asking
// for it to cover the next startedWindow queued messages.
func (s *AtMostOnceSink) awaitBound(ctx context.Context, id msgid.ID) error {
	for {
		s.mu.Lock()
		if s.durable >= id {
			s.mu.Unlock()
			return nil
		}
		if w := s.queue[min(len(s.queue), startedWindow)-1].m.ID; w > s.want {
			s.want = w
		}
		ch := s.boundCh
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Failure returns the error that stopped the sink (a target that
// validation rejects). A failure to reach ClickHouse is not one: stopping
// the job would give up what its life holds (the queue, the started
// window), while INSERTs that reached no server never started and are
// retried in place; the writer warns of the outage instead
// (warnUnreached).
func (s *AtMostOnceSink) Failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// Reconfigure applies dynamic parameters, including the queue mode's
// total_queue_bytes_limit.
func (s *AtMostOnceSink) Reconfigure(d Dynamic) error {
	if s.queued {
		if d.TotalQueueBytesLimit <= 0 {
			return errors.New("clickhouse sink: total_queue_bytes_limit must be positive")
		}
		s.limit.Store(d.TotalQueueBytesLimit)
	}
	return s.w.reconfigure(d)
}

// DeliversAtMostOnce implements connector.AtMostOnce in queue mode: an
// output reloaded from the outbox after a restart (its erase had not
// committed) was queued by the earlier life, which may have inserted it;
// the engine acknowledges it without handing it over. Ordered mode keeps
// its own record (the started bound) and takes reloaded outputs.
func (s *AtMostOnceSink) DeliversAtMostOnce() bool { return s.queued }

// Queued implements connector.Queueing (queue mode): the messages
// committed and not yet inserted or dropped. Ordered mode keeps its
// messages in the outbox until they are done, and returns 0.
func (s *AtMostOnceSink) Queued() int {
	if !s.queued {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Close stops delivery. In queue mode it first waits up to
// suspend_destruction_duration for the queue to drain (after a drain or
// completion it is empty already: see Queued) and reports what it
// abandons; in ordered mode an INSERT in flight is abandoned (its message
// stays in the outbox and is dropped, and reported, by the next life,
// being under the bound).
func (s *AtMostOnceSink) Close() error {
	if s.stop == nil {
		return nil
	}
	if s.queued {
		connector.WaitQueue(s.suspend, s.Queued)
	}
	s.stop()
	<-s.done
	s.w.close()
	if n := s.Queued(); n > 0 {
		s.drop(dropAbandoned, n, fmt.Sprintf("still queued when the sink stopped (suspend_destruction_duration %v; an INSERT in flight may have arrived)", s.suspend))
	}
	return nil
}

// Reasons of weir_clickhouse_sink_dropped_total.
const (
	dropQueueFull = "queue_full"
	dropFailed    = "insert_failed"
	dropUncertain = "uncertain_after_restart"
	dropAbandoned = "abandoned_at_close"
)

// drop counts n given-up messages under reason in the package's metric,
// logs them (structured and in the pipeline's log) and adds them to the
// computation's dropped outputs.
func (s *AtMostOnceSink) drop(reason string, n int, why string) {
	s.w.m.dropped(reason, n)
	s.w.o.logger().Warn("ClickHouse at-most-once sink dropped messages", "Sink", s.sc.SinkID,
		"Partition", s.sc.PartitionID, "Dropped", n, "Reason", reason, "Detail", why)
	s.sc.ReportDropped(n, reason+": "+why)
}

func (s *AtMostOnceSink) loop(ctx context.Context) {
	defer close(s.done)
	for {
		s.mu.Lock()
		var pm pendingMsg
		ok := len(s.queue) > 0 && s.fatal == nil
		if ok {
			pm = s.queue[0]
		}
		s.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
				continue
			}
		}
		if !s.queued {
			if err := s.awaitBound(ctx, pm.m.ID); err != nil {
				return
			}
		}
		err := s.w.insert(ctx, 0, []*weir.Message{pm.m}, "")
		if ctx.Err() != nil {
			return
		}
		var ie *InsertError
		if errors.As(err, &ie) && ie.Target {
			s.mu.Lock()
			if s.fatal == nil {
				s.fatal = fmt.Errorf("clickhouse sink %s: %w", s.sc.SinkID, err)
				s.sc.Logf("%v", s.fatal)
			}
			s.mu.Unlock()
			continue
		}
		if err != nil {
			s.drop(dropFailed, 1, fmt.Sprintf("message %s: %v", pm.m.ID, err))
		}
		s.mu.Lock()
		s.queue = s.queue[1:]
		if s.queued {
			s.qbytes -= int64(messageSize(pm.m))
		} else {
			s.finished = append(s.finished, pm)
		}
		s.mu.Unlock()
	}
}
