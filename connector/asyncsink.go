package connector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// ProducerID identifies a producer session of an ordered async sink. It is
// created on the sink's first Init for a partition and persisted, so every
// later life of the partition writes as the same producer.
type ProducerID string

// SeqNo is a producer's sequence number: +1 per message, in message id order.
type SeqNo uint64

// AsyncWriter delivers messages to an external system.
//
// Write delivers msgs, which carry the consecutive sequence numbers
// first, first+1, … of producer. The receiver must deduplicate by
// (producer, seqNo) for exactly-once (a queue's producer API does); a
// receiver that does not gets at-least-once. Write returns how many
// leading messages are durably accepted; if that is fewer than len(msgs) it
// returns the error that stopped it. The rest is written again later with
// the same sequence numbers (after a retry, or after a restart).
type AsyncWriter interface {
	Write(ctx context.Context, producer ProducerID, first SeqNo, msgs []*weir.Message) (accepted int, err error)
}

// RetryPolicy says how an ordered async sink retries a failed write.
type RetryPolicy struct {
	// InitialDelay, Multiplier and MaxDelay shape exponential backoff.
	InitialDelay time.Duration
	Multiplier   float64
	MaxDelay     time.Duration
	// MaxAttempts stops retrying after this many attempts (0: forever). The
	// messages stay unacknowledged: the partition's progress stops, visibly,
	// until the job restarts.
	MaxAttempts int
	// Jitter adds up to this fraction of random delay.
	Jitter float64
}

// DefaultRetryPolicy retries forever, from 100ms up to 10s.
var DefaultRetryPolicy = RetryPolicy{InitialDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: 10 * time.Second}

// OrderedAsyncSink is the base of transactional-outbox sinks (Flow's
// TOrderedAsyncSinkBase). Outputs reach it from the computation's outbox
// (already durable); it gives each a sequence number in id order and, after
// the epoch commit, writes them through an AsyncWriter as producer
// ProducerID. A written message is recorded as persisted
// ({max_persisted_message_id, max_persisted_seq_no} in the sink's partition
// state) by the next epoch's transaction, and only after that commit is it
// acknowledged — so it leaves the outbox only when the sink's own record of
// it is durable. After a crash, the outbox is reloaded in id order and
// messages above the persisted maximum get the same sequence numbers as
// before, so the receiver drops the ones it already has.
//
// Invariant: max_persisted_seq_no never passes a message that was not
// acknowledged by the receiver (writes complete in seqNo order).
type OrderedAsyncSink struct {
	W     AsyncWriter
	Retry RetryPolicy
	// MaxBatch bounds messages per Write (default 1000).
	MaxBatch int
	// Sleep waits between retries; tests replace it. Default time.Sleep
	// honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error

	sc    SinkContext
	state asyncState
	// producerDurable: the producer id is in the committed partition state.
	// Nothing is written before it is: a producer id lost in a crash would
	// make the next life write the same messages as another producer, which
	// the receiver could not deduplicate. producerSaving: Sync wrote it into
	// the epoch transaction now committing.
	producerDurable, producerSaving bool

	lastDistributedID  msgid.ID
	lastDistributedSeq SeqNo

	mu         sync.Mutex
	registered []asyncReq // distributed, waiting for the epoch commit
	sending    []asyncReq // handed to the delivery loop
	written    []asyncReq // accepted by the receiver, not yet recorded
	recorded   []asyncReq // recorded in the current Sync, acked at Commit
	failure    error      // sticky delivery failure (retries exhausted)
	kick       chan struct{}
	stop       context.CancelFunc
	loopDone   chan struct{}
	attempts   int
}

type asyncReq struct {
	msg  *weir.Message
	seq  SeqNo
	done func(error)
}

// asyncState is the persisted state.
type asyncState struct {
	Producer      ProducerID
	MaxPersisted  msgid.ID
	MaxPersistSeq SeqNo
}

// NewOrderedAsyncSink returns a sink writing through w.
func NewOrderedAsyncSink(w AsyncWriter) *OrderedAsyncSink {
	return &OrderedAsyncSink{W: w, Retry: DefaultRetryPolicy, MaxBatch: 1000}
}

// Init loads or creates the producer state and starts the delivery loop.
func (s *OrderedAsyncSink) Init(ctx context.Context, sc SinkContext) error {
	s.sc = sc
	b, err := sc.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("async sink %s: load state: %w", sc.SinkID, err)
	}
	if b == nil {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("async sink %s: producer id: %w", sc.SinkID, err)
		}
		s.state.Producer = ProducerID(hex.EncodeToString(id[:]))
	} else if err := s.state.decode(b); err != nil {
		return fmt.Errorf("async sink %s: state: %w", sc.SinkID, err)
	} else {
		s.producerDurable = true
	}
	s.lastDistributedID = s.state.MaxPersisted
	s.lastDistributedSeq = s.state.MaxPersistSeq
	if s.MaxBatch <= 0 {
		s.MaxBatch = 1000
	}
	if s.Sleep == nil {
		s.Sleep = sleepCtx
	}
	s.kick = make(chan struct{}, 1)
	s.loopDone = make(chan struct{})
	loopCtx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(loopCtx)
	return nil
}

// Producer returns the sink's producer id.
func (s *OrderedAsyncSink) Producer() ProducerID { return s.state.Producer }

// Distribute gives m the next sequence number. Messages at or below the
// persisted maximum were delivered in an earlier life and are acknowledged
// at once.
func (s *OrderedAsyncSink) Distribute(m *weir.Message, done func(error)) {
	if m.ID <= s.state.MaxPersisted {
		done(nil)
		return
	}
	if m.ID <= s.lastDistributedID {
		done(fmt.Errorf("async sink %s: message id %s is not greater than the last distributed id %s", s.sc.SinkID, m.ID, s.lastDistributedID))
		return
	}
	s.lastDistributedID = m.ID
	s.lastDistributedSeq++
	s.mu.Lock()
	s.registered = append(s.registered, asyncReq{msg: m, seq: s.lastDistributedSeq, done: done})
	s.mu.Unlock()
}

// Sync records the messages the receiver has accepted since the last Sync
// as persisted, in the epoch transaction.
func (s *OrderedAsyncSink) Sync(ctx context.Context, txn *store.Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.producerDurable && len(s.registered) > 0 {
		s.sc.SaveState(txn, s.state.encode())
		s.producerSaving = true
	}
	if len(s.written) == 0 {
		return nil
	}
	last := s.written[len(s.written)-1]
	s.state.MaxPersisted = last.msg.ID
	s.state.MaxPersistSeq = last.seq
	s.recorded = append(s.recorded, s.written...)
	s.written = nil
	s.sc.SaveState(txn, s.state.encode())
	return nil
}

// Commit runs after the epoch committed: it acknowledges what that commit
// recorded, and hands the newly registered messages to the delivery loop.
func (s *OrderedAsyncSink) Commit(context.Context) {
	s.mu.Lock()
	recorded := s.recorded
	s.recorded = nil
	if s.producerSaving {
		s.producerDurable, s.producerSaving = true, false
	}
	if s.producerDurable {
		s.sending = append(s.sending, s.registered...)
		s.registered = nil
	}
	s.mu.Unlock()
	for _, r := range recorded {
		r.done(nil)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Failure returns the delivery error that stopped the sink's progress, if
// its retries are exhausted.
func (s *OrderedAsyncSink) Failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Pending returns how many messages are waiting to be written or recorded.
func (s *OrderedAsyncSink) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.registered) + len(s.sending) + len(s.written) + len(s.recorded)
}

// Close stops the delivery loop. Messages not yet recorded stay in the
// outbox and are delivered again by the next job.
func (s *OrderedAsyncSink) Close() error {
	if s.stop != nil {
		s.stop()
		<-s.loopDone
	}
	return nil
}

// loop writes the sending queue in order, retrying failed writes with the
// same sequence numbers.
func (s *OrderedAsyncSink) loop(ctx context.Context) {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		n := min(len(s.sending), s.MaxBatch)
		batch := append([]asyncReq(nil), s.sending[:n]...)
		failed := s.failure != nil
		s.mu.Unlock()
		if n == 0 || failed {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
				continue
			}
		}
		msgs := make([]*weir.Message, len(batch))
		for i, r := range batch {
			msgs[i] = r.msg
		}
		accepted, err := s.writeWithRetry(ctx, batch[0].seq, msgs)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		// Acknowledgements move only as a contiguous prefix in seqNo order.
		s.sending = s.sending[accepted:]
		s.written = append(s.written, batch[:accepted]...)
		if err != nil {
			s.failure = err
			s.mu.Unlock()
			s.sc.Logf("delivery stopped after %d attempts: %v (messages stay in the outbox; restart the job to retry)", s.attempts, err)
			continue
		}
		s.mu.Unlock()
	}
}

// writeWithRetry writes msgs, retrying the unaccepted suffix with the same
// sequence numbers. It returns how many leading messages were accepted and,
// if retries ran out, the last error.
func (s *OrderedAsyncSink) writeWithRetry(ctx context.Context, first SeqNo, msgs []*weir.Message) (int, error) {
	delay := s.Retry.InitialDelay
	done := 0
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		s.attempts = attempt
		s.mu.Unlock()
		n, err := s.W.Write(ctx, s.state.Producer, first+SeqNo(done), msgs[done:])
		done += max(0, min(n, len(msgs)-done))
		if err == nil && done == len(msgs) {
			return done, nil
		}
		if err == nil {
			err = fmt.Errorf("writer accepted %d of %d messages without an error", n, len(msgs)-done+n)
		}
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
		if s.Retry.MaxAttempts > 0 && attempt >= s.Retry.MaxAttempts {
			return done, err
		}
		s.sc.Logf("write from seqNo %d failed (attempt %d): %v; retrying in %v", first+SeqNo(done), attempt, err, delay)
		if err := s.Sleep(ctx, s.jitter(delay)); err != nil {
			return done, err
		}
		delay = time.Duration(float64(delay) * max(s.Retry.Multiplier, 1))
		if s.Retry.MaxDelay > 0 && delay > s.Retry.MaxDelay {
			delay = s.Retry.MaxDelay
		}
	}
}

func (s *OrderedAsyncSink) jitter(d time.Duration) time.Duration {
	if s.Retry.Jitter <= 0 {
		return d
	}
	return d + time.Duration(float64(d)*s.Retry.Jitter*mrand.Float64())
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const asyncStateVersion = 1

func (st asyncState) encode() []byte {
	b := []byte{asyncStateVersion}
	b = codec.AppendString(b, string(st.Producer))
	b = codec.AppendString(b, string(st.MaxPersisted))
	return codec.AppendUvarint(b, uint64(st.MaxPersistSeq))
}

func (st *asyncState) decode(b []byte) error {
	if len(b) == 0 || b[0] != asyncStateVersion {
		return errors.New("unknown async sink state version")
	}
	p, rest, err := codec.String(b[1:])
	if err != nil {
		return err
	}
	m, rest, err := codec.String(rest)
	if err != nil {
		return err
	}
	seq, _, err := codec.Uvarint(rest)
	if err != nil {
		return err
	}
	st.Producer, st.MaxPersisted, st.MaxPersistSeq = ProducerID(p), msgid.ID(m), SeqNo(seq)
	return nil
}

// PendingSync reports whether the sink needs an epoch: accepted writes to
// record, or registered messages waiting for a commit to be sent. The engine
// then runs an epoch (and commits) even without new input.
func (s *OrderedAsyncSink) PendingSync() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Registered messages leave only at Commit, which runs after an epoch
	// commit; outputs reloaded from the outbox by a restarted job would
	// otherwise wait forever in a job that has no new input.
	return len(s.written) > 0 || len(s.registered) > 0
}
