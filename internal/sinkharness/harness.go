// Package sinkharness drives a connector.Sink as the runtime does (Init,
// Distribute in id order, Sync into an epoch, Commit after it), keeping the
// sink's committed partition state and an outbox in memory, so that tests
// can crash an instance at any point and start the next life over the
// same committed state and the undelivered messages.
package sinkharness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Harness is one partition's sink seen by the runtime.
type Harness struct {
	t           testing.TB
	PartitionID string

	mu      sync.Mutex
	state   []byte // committed state
	pending []byte // saved by the current Sync
	saved   bool
	outbox  map[msgid.ID]*weir.Message // committed, not acknowledged
	acked   map[msgid.ID]int
	erase   []msgid.ID // acknowledged since the last commit
	failed  []error
	logs    []string
	life    int // bumped by Crash: callbacks of older lives are ignored
}

// New returns a harness for partition "Counter/0".
func New(t testing.TB) *Harness {
	return &Harness{t: t, PartitionID: "Counter/0", outbox: map[msgid.ID]*weir.Message{}, acked: map[msgid.ID]int{}}
}

func (h *Harness) sinkContext() connector.SinkContext {
	return connector.SinkContext{
		PartitionID: h.PartitionID,
		SinkID:      "out",
		LoadState: func(context.Context) ([]byte, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.state == nil {
				return nil, nil
			}
			return append([]byte(nil), h.state...), nil
		},
		SaveState: func(_ *store.Txn, b []byte) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.pending, h.saved = append([]byte(nil), b...), true
		},
		Logf: func(format string, args ...any) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.logs = append(h.logs, fmt.Sprintf(format, args...))
		},
	}
}

// Logs returns the sink's log lines.
func (h *Harness) Logs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.logs, "\n")
}

// Init initializes s over the committed state and, like the runtime,
// hands it the undelivered outbox in id order.
func (h *Harness) Init(s connector.Sink) error {
	if err := s.Init(context.Background(), h.sinkContext()); err != nil {
		return err
	}
	h.mu.Lock()
	msgs := make([]*weir.Message, 0, len(h.outbox))
	for _, m := range h.outbox {
		msgs = append(msgs, m)
	}
	h.mu.Unlock()
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].ID < msgs[j].ID })
	for _, m := range msgs {
		s.Distribute(m, h.done(m.ID))
	}
	return nil
}

// MustInit is Init that fails the test on error.
func (h *Harness) MustInit(s connector.Sink) {
	h.t.Helper()
	if err := h.Init(s); err != nil {
		h.t.Fatal(err)
	}
}

func (h *Harness) done(id msgid.ID) func(error) {
	h.mu.Lock()
	life := h.life
	h.mu.Unlock()
	return func(err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if life != h.life {
			return
		}
		if err != nil {
			h.failed = append(h.failed, err)
			return
		}
		h.acked[id]++
		// The runtime erases an output acknowledged by all its destinations
		// in its next commit; a crash before it keeps it (the sink's state
		// then says it was delivered).
		h.erase = append(h.erase, id)
	}
}

// Epoch distributes msgs (new outputs of this epoch, stored in the outbox
// by its commit) and runs Sync; if Sync succeeds the epoch commits (the
// saved state and the outbox changes), then Commit runs. crashBeforeCommit
// simulates a crash after Sync: nothing commits.
func (h *Harness) Epoch(s connector.Sink, msgs ...*weir.Message) error {
	for _, m := range msgs {
		s.Distribute(m, h.done(m.ID))
	}
	h.mu.Lock()
	h.saved = false
	h.mu.Unlock()
	if err := s.Sync(context.Background(), store.NewTxn()); err != nil {
		return err
	}
	h.mu.Lock()
	if h.saved {
		h.state = h.pending
	}
	for _, m := range msgs {
		h.outbox[m.ID] = m
	}
	for _, id := range h.erase {
		delete(h.outbox, id)
	}
	h.erase = h.erase[:0]
	h.mu.Unlock()
	s.Commit(context.Background())
	return nil
}

// Crash abandons s as a killed process would (its goroutines stop; late
// callbacks are ignored) without committing anything more.
func (h *Harness) Crash(s connector.Sink) {
	h.mu.Lock()
	h.life++
	h.erase = nil
	h.mu.Unlock()
	_ = s.Close()
}

// Acked reports how many times id was acknowledged (in any life).
func (h *Harness) Acked(id msgid.ID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked[id]
}

// Failed returns the errors given to done callbacks.
func (h *Harness) Failed() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.failed...)
}

// Outbox returns how many messages are undelivered.
func (h *Harness) Outbox() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.outbox)
}

// Drain runs empty epochs until every message is acknowledged and the
// outbox is empty, or d passes.
func (h *Harness) Drain(s connector.Sink, msgs []*weir.Message, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		h.mu.Lock()
		all := len(h.outbox) == 0
		for _, m := range msgs {
			all = all && h.acked[m.ID] > 0
		}
		h.mu.Unlock()
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every message acknowledged within %v (outbox %d)\n%s", d, h.Outbox(), h.Logs())
		}
		if err := h.Epoch(s); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitFor polls cond every 10ms for up to d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Messages returns n messages of one epoch (seq) with increasing ids,
// payload {"key": key, "count": from+i}.
func Messages(seq uint64, key string, from, n int) []*weir.Message {
	out := make([]*weir.Message, n)
	for i := range out {
		out[i] = &weir.Message{
			ID:      msgid.Ordered(seq, "counts", uint64(i)),
			Stream:  "counts",
			Payload: weir.Row{"key": key, "count": int64(from + i)},
		}
	}
	return out
}

// MustNew builds a sink with a constructor, failing the test on error.
func MustNew[S, O any](t testing.TB, f func(connector.SinkParams, O) (S, error), sp connector.SinkParams, o O) S {
	t.Helper()
	s, err := f(sp, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustEpoch is Epoch that fails the test on error.
func (h *Harness) MustEpoch(s connector.Sink, msgs ...*weir.Message) {
	h.t.Helper()
	if err := h.Epoch(s, msgs...); err != nil {
		h.t.Fatal(err)
	}
}

// Finish drains s until msgs are acknowledged (30s at most, else the test
// fails), then stops it as a crash would.
func (h *Harness) Finish(s connector.Sink, msgs []*weir.Message) {
	h.t.Helper()
	if err := h.Drain(s, msgs, 30*time.Second); err != nil {
		h.t.Fatal(err)
	}
	h.Crash(s)
}

// EpochsUntil runs empty epochs, as the engine does while a sink has
// PendingSync work, until cond holds; the test fails after d.
func (h *Harness) EpochsUntil(s connector.Sink, d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not reached within %v\n%s", what, d, h.Logs())
		}
		h.MustEpoch(s)
		time.Sleep(5 * time.Millisecond)
	}
}
