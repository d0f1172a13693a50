package connector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
)

// AtMostOnceSink is the base of sinks with at_most_once_strategy enabled
// (Flow's TAsyncAtMostOnceSinkBase): each output is acknowledged at once
// (it never holds the outbox) and queued in memory; after the epoch commit
// the queue is written in the background. When the queued bytes would pass
// total_queue_bytes_limit, new messages are dropped without an error; a
// failed write is dropped too. Nothing is persisted, so a crash loses
// whatever was queued: each message is delivered at most once.
//
// Loss is allowed on a crash or on a reported give-up, never on a clean
// stop: the sink implements Queueing, so its partition counts as busy
// (a drain or the completion waits) until the queue is written, and Close
// waits up to suspend_destruction_duration for what remains (a job moved
// or stopped hard). Every message given up — overflow, a failed write,
// abandoned by Close — is reported (SinkContext.ReportDropped: a warning
// with the count and reason, and the computation's dropped counter that
// the run summary and 'weir pipeline status' show).
type AtMostOnceSink struct {
	W        AsyncWriter
	Limit    int64
	Suspend  time.Duration
	MaxBatch int

	sc       SinkContext
	producer ProducerID
	seq      SeqNo

	mu       sync.Mutex
	pending  []*weir.Message // distributed this epoch, sent after commit
	queue    []*weir.Message
	bytes    int64
	kick     chan struct{}
	stop     context.CancelFunc
	loopDone chan struct{}

	dropped   atomic.Int64 // by the byte limit
	delivered atomic.Int64
	failed    atomic.Int64 // by a failed write
	abandoned atomic.Int64 // by Close
}

// Queueing is implemented by sinks that acknowledge outputs before they
// are written (an at-most-once queue). While Queued is above zero the job
// reports its partition neither quiet nor drained, so a drain (stop) and
// the completion of a finite pipeline wait for the queue to be written:
// stopping cleanly loses nothing. (A sink whose writes fail without end
// keeps its partition busy; the drain's own deadline then stops it hard
// and Close reports what it abandons.)
type Queueing interface {
	Queued() int
}

// ReportDropped reports n outputs the sink gave up (at-most-once): a
// warning naming the count and why, and the count added to the
// computation's dropped outputs (the run summary, 'weir pipeline status',
// weir_sink_dropped_total). Safe from any goroutine, also after Close.
func (sc SinkContext) ReportDropped(n int, why string) {
	if n <= 0 {
		return
	}
	if sc.Logf != nil {
		sc.Logf("WARNING: %d message(s) dropped (at-most-once): %s", n, why)
	}
	if sc.Dropped != nil {
		sc.Dropped(n)
	}
}

// NewAtMostOnceSink returns an at-most-once sink with the strategy's limits.
func NewAtMostOnceSink(w AsyncWriter, s AtMostOnceStrategy) *AtMostOnceSink {
	return &AtMostOnceSink{W: w, Limit: s.TotalQueueBytesLimit, Suspend: s.SuspendDestructionDuration, MaxBatch: 1000}
}

// Init creates a fresh producer (no state is persisted) and starts the writer.
func (s *AtMostOnceSink) Init(_ context.Context, sc SinkContext) error {
	s.sc = sc
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	s.producer = ProducerID(hex.EncodeToString(id[:]))
	if s.MaxBatch <= 0 {
		s.MaxBatch = 1000
	}
	s.kick = make(chan struct{}, 1)
	s.loopDone = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(ctx)
	return nil
}

// DeliversAtMostOnce implements AtMostOnce: outputs reloaded after a
// restart are never handed to this sink again.
func (s *AtMostOnceSink) DeliversAtMostOnce() bool { return true }

// Distribute acknowledges m at once and keeps it for after the commit.
func (s *AtMostOnceSink) Distribute(m *weir.Message, done func(error)) {
	s.mu.Lock()
	s.pending = append(s.pending, m)
	s.mu.Unlock()
	done(nil)
}

// Sync does nothing: at-most-once sinks keep no state.
func (s *AtMostOnceSink) Sync(context.Context, *store.Txn) error { return nil }

// Commit queues this epoch's messages while the byte limit allows and
// drops the rest.
func (s *AtMostOnceSink) Commit(context.Context) {
	s.mu.Lock()
	var dropped int64
	for _, m := range s.pending {
		size := int64(messageBytes(m))
		if s.Limit > 0 && s.bytes+size > s.Limit {
			dropped++
			continue
		}
		s.queue = append(s.queue, m)
		s.bytes += size
	}
	s.pending = s.pending[:0]
	s.mu.Unlock()
	if dropped > 0 {
		total := s.dropped.Add(dropped)
		s.sc.ReportDropped(int(dropped), fmt.Sprintf("the queue is full (total_queue_bytes_limit %d); %d dropped so far by the limit", s.Limit, total))
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Dropped returns how many messages were dropped by the byte limit.
func (s *AtMostOnceSink) Dropped() int64 { return s.dropped.Load() }

// Failed returns how many messages were dropped because their write failed.
func (s *AtMostOnceSink) Failed() int64 { return s.failed.Load() }

// Abandoned returns how many queued messages Close gave up.
func (s *AtMostOnceSink) Abandoned() int64 { return s.abandoned.Load() }

// Delivered returns how many messages were written.
func (s *AtMostOnceSink) Delivered() int64 { return s.delivered.Load() }

// Queued implements Queueing: the messages committed and not yet written
// or dropped.
func (s *AtMostOnceSink) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Close waits up to suspend_destruction_duration for queued writes, then
// stops; what is still queued (its write cancelled, or never started) is
// abandoned and reported.
func (s *AtMostOnceSink) Close() error {
	if s.stop == nil {
		return nil
	}
	WaitQueue(s.Suspend, s.Queued)
	s.stop()
	<-s.loopDone
	if n := s.Queued(); n > 0 {
		s.abandoned.Add(int64(n))
		s.sc.ReportDropped(n, fmt.Sprintf("still queued when the sink stopped (suspend_destruction_duration %v)", s.Suspend))
	}
	return nil
}

// WaitQueue waits until queued() is zero or d has passed, and reports
// whether the queue emptied: the wait of an at-most-once sink's Close.
func WaitQueue(d time.Duration, queued func() int) bool {
	deadline := time.Now().Add(d)
	for queued() > 0 {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func (s *AtMostOnceSink) loop(ctx context.Context) {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		n := min(len(s.queue), s.MaxBatch)
		batch := append([]*weir.Message(nil), s.queue[:n]...)
		s.mu.Unlock()
		if n == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
				continue
			}
		}
		first := s.seq + 1
		s.seq += SeqNo(n)
		if _, err := s.W.Write(ctx, s.producer, first, batch); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.failed.Add(int64(n))
			s.sc.ReportDropped(n, fmt.Sprintf("write failed: %v", err))
		} else {
			s.delivered.Add(int64(n))
		}
		s.mu.Lock()
		for _, m := range batch {
			s.bytes -= int64(messageBytes(m))
		}
		s.queue = s.queue[n:]
		s.mu.Unlock()
	}
}

// messageBytes estimates a message's size for the queue limit.
func messageBytes(m *weir.Message) int {
	n := len(m.ID) + 32
	for k, v := range m.Payload {
		n += len(k) + 8
		switch x := v.(type) {
		case string:
			n += len(x)
		case []byte:
			n += len(x)
		}
	}
	return n
}
