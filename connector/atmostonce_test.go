package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// gatedWriter is an AsyncWriter whose writes wait for the gate (or ctx)
// and then fail while fail is set.
type gatedWriter struct {
	gate    chan struct{}
	fail    atomic.Bool
	written atomic.Int64
}

func (w *gatedWriter) Write(ctx context.Context, _ ProducerID, _ SeqNo, msgs []*weir.Message) (int, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-w.gate:
	}
	if w.fail.Load() {
		return 0, errors.New("receiver said no")
	}
	w.written.Add(int64(len(msgs)))
	return len(msgs), nil
}

// dropLog is a SinkContext that collects log lines and reported drops.
type dropLog struct {
	mu      sync.Mutex
	lines   []string
	dropped atomic.Int64
}

func (d *dropLog) context() SinkContext {
	return SinkContext{PartitionID: "C/0", SinkID: "amo",
		Logf: func(format string, args ...any) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.lines = append(d.lines, fmt.Sprintf(format, args...))
		},
		Dropped: func(n int) { d.dropped.Add(int64(n)) }}
}

func (d *dropLog) text() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

func amoMessages(seq uint64, n int) []*weir.Message {
	out := make([]*weir.Message, n)
	for i := range out {
		out[i] = &weir.Message{ID: msgid.Ordered(seq, "s", uint64(i)), Stream: "s", Payload: weir.Row{"v": "0123456789"}}
	}
	return out
}

func commitAll(s *AtMostOnceSink, msgs []*weir.Message) {
	for _, m := range msgs {
		s.Distribute(m, func(error) {})
	}
	s.Commit(context.Background())
}

// TestAtMostOnceSinkReportsEveryDrop: the base sink keeps its partition
// busy (Queued) while messages wait, and every message it gives up — over
// the byte limit, a failed write, still queued when Close's wait ends —
// is reported with its count and reason, none silently.
func TestAtMostOnceSinkReportsEveryDrop(t *testing.T) {
	w := &gatedWriter{gate: make(chan struct{})}
	var d dropLog
	// Room for 3 of the 5 messages of the first commit.
	size := int64(messageBytes(amoMessages(1, 1)[0]))
	s := NewAtMostOnceSink(w, AtMostOnceStrategy{Enabled: true, TotalQueueBytesLimit: 3 * size, SuspendDestructionDuration: 100 * time.Millisecond})
	s.MaxBatch = 1
	if err := s.Init(context.Background(), d.context()); err != nil {
		t.Fatal(err)
	}
	commitAll(s, amoMessages(1, 5))
	if q := s.Queued(); q != 3 {
		t.Fatalf("Queued() = %d, want 3 (2 over the limit)", q)
	}
	// The first write fails, the second succeeds; the third stays queued.
	w.fail.Store(true)
	w.gate <- struct{}{}
	waitFor(t, func() bool { return s.Failed() == 1 })
	w.fail.Store(false)
	w.gate <- struct{}{}
	waitFor(t, func() bool { return w.written.Load() == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Dropped() != 2 || s.Failed() != 1 || s.Abandoned() != 1 || d.dropped.Load() != 4 {
		t.Errorf("dropped by limit %d, failed %d, abandoned %d, reported %d: want 2, 1, 1 and 4 reported",
			s.Dropped(), s.Failed(), s.Abandoned(), d.dropped.Load())
	}
	for _, want := range []string{
		"WARNING: 2 message(s) dropped (at-most-once): the queue is full",
		"WARNING: 1 message(s) dropped (at-most-once): write failed: receiver said no",
		"WARNING: 1 message(s) dropped (at-most-once): still queued when the sink stopped (suspend_destruction_duration 100ms)",
	} {
		if !strings.Contains(d.text(), want) {
			t.Errorf("log lacks %q:\n%s", want, d.text())
		}
	}
}

// TestAtMostOnceSinkCloseWaitsForQueue: Close waits for queued writes
// (within suspend_destruction_duration) and then reports nothing dropped.
func TestAtMostOnceSinkCloseWaitsForQueue(t *testing.T) {
	w := &gatedWriter{gate: make(chan struct{})}
	close(w.gate)
	var d dropLog
	s := NewAtMostOnceSink(w, AtMostOnceStrategy{Enabled: true, TotalQueueBytesLimit: 1 << 20, SuspendDestructionDuration: 10 * time.Second})
	if err := s.Init(context.Background(), d.context()); err != nil {
		t.Fatal(err)
	}
	commitAll(s, amoMessages(1, 50))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if w.written.Load() != 50 || d.dropped.Load() != 0 || s.Queued() != 0 {
		t.Errorf("written %d, reported dropped %d, queued %d: want 50, 0, 0\n%s", w.written.Load(), d.dropped.Load(), s.Queued(), d.text())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
