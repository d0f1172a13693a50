package clickhouse

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// BatchingSink is ClickHouseBatchingSink and, with shard_hosts,
// ShardedClickHouseBatchingSink: exactly-once through the transactional
// outbox with deterministic batches.
//
// Outputs reach it from the computation's outbox (already durable). In the
// epoch that distributed them, Sync cuts the new messages into batches of
// at most max_batch_rows rows and max_batch_bytes bytes, in id order, and
// records the plan (each batch's last id and row count) in the sink's
// partition state in the same transaction. Only after that commit does
// the delivery goroutine INSERT a batch, with insert_deduplication_token =
// deduplication_token_prefix + the batch's last (maximum) message id, plus
// ":<shard>" for a sharded sink. A batch whose INSERT succeeded is recorded
// as acked by the next epoch, and its messages are acknowledged (and leave
// the outbox) only after that commit.
//
// After a crash, the outbox is reloaded and handed to the sink in id
// order; the persisted plan cuts it into the same batches, which encode to
// the same bytes and carry the same tokens. ClickHouse drops a batch it
// already has: by the token, or, on servers without token support (18.x),
// by the identical block of a Replicated table.
type BatchingSink struct {
	w      *writer
	p      *Params
	router *router // nil: one shard
	fp     string

	sc connector.SinkContext

	// Job goroutine only.
	st      batchState
	lastID  msgid.ID
	open    []pendingMsg // distributed, not yet in a planned batch
	fill    int          // index in batches of the loaded batch being refilled
	loaded  int          // batches[:loaded] came from the persisted plan
	checked bool         // the loaded batches were checked complete

	mu      sync.Mutex
	batches []*batch // planned and not yet acknowledged, in id order
	fatal   error
	kick    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

type pendingMsg struct {
	m    *weir.Message
	done func(error)
}

// batch is one planned batch.
type batch struct {
	end  msgid.ID
	rows int
	msgs []pendingMsg
	// durable: its plan entry is committed, so it may be sent.
	durable bool
	// planning: its plan entry is in the transaction now committing.
	planning bool
	// sent[i]: shard i accepted its part in this life.
	sent []bool
	// inserted: every shard accepted it; recording: Sync wrote acked =
	// end into the transaction now committing.
	inserted, recording bool
}

// NewBatchingSink builds a ClickHouseBatchingSink (host or hosts). It
// checks the parameters and does not connect.
func NewBatchingSink(sp connector.SinkParams, o Options) (*BatchingSink, error) {
	return newBatchingSink(sp, o, targetHosts)
}

// NewShardedBatchingSink builds a ShardedClickHouseBatchingSink
// (shard_hosts). It checks the parameters and does not connect.
func NewShardedBatchingSink(sp connector.SinkParams, o Options) (*BatchingSink, error) {
	return newBatchingSink(sp, o, targetShards)
}

func newBatchingSink(sp connector.SinkParams, o Options, kind targetKind) (*BatchingSink, error) {
	if err := rejectAtMostOnce(sp); err != nil {
		return nil, err
	}
	p, shards, err := parseParams(sp.Path+".parameters", sp.Parameters, kind, o.getenv())
	if err != nil {
		return nil, err
	}
	s := &BatchingSink{p: p, w: newWriter(sp.SinkID, p, shards, modeExactlyOnce, o)}
	if kind == targetShards {
		s.router = &router{keyCols: p.ShardingKeyColumns}
		for _, sh := range shards {
			s.router.names = append(s.router.names, sh.Name)
		}
		s.fp = s.router.fingerprint()
	}
	return s, nil
}

func rejectAtMostOnce(sp connector.SinkParams) error {
	if sp.AtMostOnce != nil && sp.AtMostOnce.Enabled {
		return fmt.Errorf("%s.at_most_once_strategy: only %s supports at-most-once delivery; remove it or change the class", sp.Path, AtMostOnceSinkClassName)
	}
	return nil
}

// Init loads the state and starts the delivery goroutine. Batches of the
// persisted plan are refilled by the reloaded outbox. A sharded sink whose
// plan was made for another topology refuses to start.
func (s *BatchingSink) Init(ctx context.Context, sc connector.SinkContext) error {
	s.sc = sc
	s.w.start(sc)
	raw, err := sc.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("clickhouse sink %s: load state: %w", sc.SinkID, err)
	}
	if raw != nil {
		if s.st, err = decodeBatchState(raw); err != nil {
			return fmt.Errorf("clickhouse sink %s: %w", sc.SinkID, err)
		}
	}
	if len(s.st.Plan) > 0 && s.st.Fingerprint != s.fp {
		return fmt.Errorf("clickhouse sink %s: %d undelivered batches (up to message %s) were planned for another shard topology (fingerprint %q, now %q: %s); "+
			"delivering them with another split would break exactly-once. Restore the previous shard_hosts and sharding_key_columns until they are delivered",
			sc.SinkID, len(s.st.Plan), s.st.Plan[len(s.st.Plan)-1].End, s.st.Fingerprint, s.fp, s.describeRouting())
	}
	s.lastID = s.st.Acked
	for _, e := range s.st.Plan {
		s.batches = append(s.batches, &batch{end: e.End, rows: int(e.Rows), durable: true, sent: make([]bool, len(s.w.shards))})
	}
	s.loaded = len(s.batches)
	s.kick = make(chan struct{}, 1)
	s.done = make(chan struct{})
	lctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(lctx)
	return nil
}

func (s *BatchingSink) describeRouting() string {
	if s.router == nil {
		return "one shard"
	}
	return s.router.describe()
}

// Distribute takes m in id order. A message at or below the acked bound
// was delivered by an earlier life and is acknowledged at once; one inside
// the persisted plan refills its batch; a later one waits for Sync to plan
// it.
func (s *BatchingSink) Distribute(m *weir.Message, done func(error)) {
	if !admit(s.sc.SinkID, s.st.Acked, &s.lastID, m, done) {
		return
	}
	pm := pendingMsg{m: m, done: done}
	if s.fill < s.loaded {
		s.mu.Lock()
		b := s.batches[s.fill]
		if m.ID <= b.end {
			b.msgs = append(b.msgs, pm)
			if m.ID == b.end {
				s.fill++
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.setFatal(fmt.Errorf("clickhouse sink %s: the persisted plan has a batch ending at message %s with %d rows, but the outbox gave %d of them and then %s: "+
			"the batch cannot be formed again, and sending another one under its token could lose rows", s.sc.SinkID, b.end, b.rows, len(b.msgs), m.ID))
		return
	}
	s.open = append(s.open, pm)
}

// Sync records inserted batches as acked, plans the new messages into
// batches, and writes the state into txn. A sink stopped by a fatal error
// returns it: the epoch fails and the job restarts with a new instance.
func (s *BatchingSink) Sync(ctx context.Context, txn *store.Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	if !s.checked {
		s.checked = true
		for _, b := range s.batches[:s.loaded] {
			if len(b.msgs) != b.rows {
				return s.setFatalLocked(fmt.Errorf("clickhouse sink %s: the persisted plan has a batch ending at message %s with %d rows, but the outbox gave %d: "+
					"the batch cannot be formed again", s.sc.SinkID, b.end, b.rows, len(b.msgs)))
			}
		}
	}
	changed := false
	for _, b := range s.batches {
		if !b.inserted {
			break
		}
		if !b.recording {
			b.recording = true
			s.st.Acked = b.end
			changed = true
		}
	}
	if changed {
		i := 0
		for i < len(s.st.Plan) && s.st.Plan[i].End <= s.st.Acked {
			i++
		}
		s.st.Plan = s.st.Plan[i:]
	}
	for len(s.open) > 0 {
		n, bytes := 0, 0
		for n < len(s.open) && n < s.p.MaxBatchRows {
			sz := messageSize(s.open[n].m)
			if n > 0 && bytes+sz > s.p.MaxBatchBytes {
				break
			}
			bytes += sz
			n++
		}
		b := &batch{end: s.open[n-1].m.ID, rows: n, msgs: s.open[:n:n], planning: true, sent: make([]bool, len(s.w.shards))}
		s.open = s.open[n:]
		s.batches = append(s.batches, b)
		s.st.Plan = append(s.st.Plan, planEntry{End: b.end, Rows: uint64(n)})
		changed = true
	}
	s.open = nil
	if changed {
		if len(s.st.Plan) > 0 {
			s.st.Fingerprint = s.fp
		} else {
			s.st.Fingerprint = ""
		}
		s.sc.SaveState(txn, s.st.encode())
	}
	return nil
}

// messageSize estimates a message's encoded size for max_batch_bytes; it
// depends only on the message, so batch cuts are deterministic.
func messageSize(m *weir.Message) int {
	n := 1
	for k, v := range m.Payload {
		n += len(k) + 2
		switch x := v.(type) {
		case string:
			n += len(x)
		case []byte:
			n += len(x)
		default:
			n += 8
		}
	}
	return n
}

// Commit runs after the epoch committed: batches it planned may be sent;
// batches it recorded are acknowledged.
func (s *BatchingSink) Commit(context.Context) {
	s.mu.Lock()
	var acked []*batch
	keep := s.batches[:0]
	for _, b := range s.batches {
		if b.planning {
			b.planning, b.durable = false, true
		}
		if b.recording {
			acked = append(acked, b)
			continue
		}
		keep = append(keep, b)
	}
	s.loaded -= min(s.loaded, len(acked))
	s.fill -= min(s.fill, len(acked))
	s.batches = keep
	s.mu.Unlock()
	for _, b := range acked {
		for _, pm := range b.msgs {
			pm.done(nil)
		}
	}
	s.wake()
}

func (s *BatchingSink) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// PendingSync implements connector.PendingSyncer: messages wait to be
// planned, an inserted batch waits to be recorded, the loaded plan waits
// for its first check, or a fatal error must fail the job.
func (s *BatchingSink) PendingSync() bool {
	if len(s.open) > 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil || (!s.checked && len(s.batches) > 0) {
		return true
	}
	for _, b := range s.batches {
		if b.inserted && !b.recording {
			return true
		}
	}
	return false
}

// Failure returns the error that stopped the sink, if any, or else the
// failure to reach ClickHouse of its current batch (connector.Outage): the
// job reports either, and the controller stops it and restarts the
// partition with backoff. The batch stays planned, and the next life sends
// it again with the same token.
func (s *BatchingSink) Failure() error {
	s.mu.Lock()
	err := s.fatal
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.w.outageErr() // the job's report names the sink
}

func (s *BatchingSink) setFatal(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.setFatalLocked(err)
}

func (s *BatchingSink) setFatalLocked(err error) error {
	if s.fatal == nil {
		s.fatal = err
		s.sc.Logf("%v", err)
	}
	return s.fatal
}

// Pending returns how many messages wait to be written or acknowledged.
func (s *BatchingSink) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.open)
	for _, b := range s.batches {
		n += len(b.msgs)
	}
	return n
}

// Reconfigure applies dynamic parameters (see Dynamic).
func (s *BatchingSink) Reconfigure(d Dynamic) error { return s.w.reconfigure(d) }

// Close stops delivery (an INSERT in flight is abandoned; its batch is
// sent again by the next instance) and closes the transports.
func (s *BatchingSink) Close() error {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	s.w.close()
	return nil
}

// Token returns the deduplication token of the batch ending at end for
// shard ("" for an unsharded sink).
func Token(prefix string, end msgid.ID, shard string) string {
	t := prefix + string(end)
	if shard != "" {
		t += ":" + shard
	}
	return t
}

// loop sends durable batches in order, one at a time.
func (s *BatchingSink) loop(ctx context.Context) {
	defer close(s.done)
	for {
		s.mu.Lock()
		var next *batch
		for _, b := range s.batches {
			if !b.inserted {
				if b.durable && len(b.msgs) == b.rows && s.fatal == nil {
					next = b
				}
				break
			}
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
				continue
			}
		}
		if err := s.send(ctx, next); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.setFatal(fmt.Errorf("clickhouse sink %s: batch ending at message %s: %w", s.sc.SinkID, next.end, err))
			continue
		}
		s.mu.Lock()
		next.inserted = true
		s.mu.Unlock()
		s.w.m.batch()
	}
}

// send inserts every shard's part of b that this life has not sent yet.
func (s *BatchingSink) send(ctx context.Context, b *batch) error {
	msgs := make([]*weir.Message, len(b.msgs))
	for i, pm := range b.msgs {
		msgs[i] = pm.m
	}
	parts := [][]*weir.Message{msgs}
	if s.router != nil {
		parts = make([][]*weir.Message, len(s.w.shards))
		for _, m := range msgs {
			i, err := s.router.shardOf(m)
			if err != nil {
				return err
			}
			parts[i] = append(parts[i], m)
		}
	}
	for i, part := range parts {
		if b.sent[i] || len(part) == 0 {
			continue
		}
		if err := s.w.insert(ctx, i, part, Token(s.p.DeduplicationTokenPrefix, b.end, s.w.shards[i].shard.Name)); err != nil {
			return err
		}
		b.sent[i] = true
	}
	return nil
}
