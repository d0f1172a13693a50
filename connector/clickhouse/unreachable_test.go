package clickhouse_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/internal/sinkharness"
)

// unusedAddr returns a loopback address where nothing listens.
func unusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// checkReach fails t unless err is the *connector.ReachError of addr.
func checkReach(t *testing.T, err error, addr string) {
	t.Helper()
	var re *connector.ReachError
	if !errors.As(err, &re) || re.Server != "http://"+addr || re.Attempt < 1 ||
		!strings.Contains(err.Error(), "cannot reach http://"+addr+": dial: connect: connection refused, retrying (attempt ") {
		t.Fatalf("error %v: want a failure to reach http://%s", err, addr)
	}
}

// TestUnreachableServerReported (issue 25 item 3): with nothing listening
// at host, every ClickHouse sink reports the failure to reach it at once —
// the batching sink through Failure (the job reports it, and the
// controller stops and restarts the partition), the at-most-once sink by
// a warning (it keeps its job: see AtMostOnceSink.Failure), the
// at-least-once sink, whose INSERT blocks Sync, by failing the epoch
// within about a second — instead of retrying in silence.
func TestUnreachableServerReported(t *testing.T) {
	addr := unusedAddr(t)
	sp := sinkParams(addr, "t", map[string]any{"retry_initial_delay": 20, "retry_maximum_delay": 100})
	msgs := sinkharness.Messages(1, "a", 1, 3)
	failing := func(s interface{ Failure() error }) func() bool {
		return func() bool { return s.Failure() != nil }
	}
	t.Run("batching", func(t *testing.T) {
		h := sinkharness.New(t)
		s := sinkharness.MustNew(t, clickhouse.NewBatchingSink, sp, clickhouse.Options{})
		h.MustInit(s)
		h.MustEpoch(s, msgs...)
		sinkharness.WaitFor(t, 5*time.Second, "the outage reported", failing(s))
		checkReach(t, s.Failure(), addr)
		h.Crash(s)
	})
	t.Run("at-most-once", func(t *testing.T) {
		// It warns and keeps its job: a stop would give up what the
		// life holds, and an INSERT that reached no server is retried.
		var logs syncLog
		h := sinkharness.New(t)
		s := sinkharness.MustNew(t, clickhouse.NewAtMostOnceSink, sp, clickhouse.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		h.MustInit(s)
		h.MustEpoch(s, msgs...)
		h.EpochsUntil(s, 5*time.Second, "the outage warned", func() bool { return strings.Contains(logs.String(), "cannot reach http://"+addr) })
		if err := s.Failure(); err != nil {
			t.Fatalf("the at-most-once sink stops its job on an outage: %v", err)
		}
		h.Crash(s)
	})
	t.Run("at-least-once", func(t *testing.T) {
		h := sinkharness.New(t)
		s := sinkharness.MustNew(t, clickhouse.NewAtLeastOnceSink, sp, clickhouse.Options{})
		h.MustInit(s)
		res := make(chan error, 1)
		go func() { res <- h.Epoch(s, msgs...) }()
		select {
		case err := <-res:
			checkReach(t, err, addr)
			h.Crash(s)
		case <-time.After(5 * time.Second):
			t.Fatal("the epoch still retries in silence after 5s, want it failed within about a second")
		}
	})
}

// TestUnreachableServerRecovers: the batching sink's outage clears at the
// first INSERT that reaches the server (here a forwarder to the live
// server starts listening at the address), and every row arrives once.
func TestUnreachableServerRecovers(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	addr := unusedAddr(t)
	h := sinkharness.New(t)
	s := sinkharness.MustNew(t, clickhouse.NewBatchingSink,
		sinkParams(addr, table, map[string]any{"retry_initial_delay": 20, "retry_maximum_delay": 100}), clickhouse.Options{})
	h.MustInit(s)
	msgs := sinkharness.Messages(1, "a", 1, 5)
	h.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 5*time.Second, "the outage reported", func() bool { return s.Failure() != nil })
	forward(t, addr, srv.Host())
	h.Finish(s, msgs)
	if err := s.Failure(); err != nil {
		t.Errorf("the outage was not cleared after the rows were written: %v", err)
	}
	checkExact(t, counts(t, srv, table), map[string]int{"a": 5})
}

// forward listens at addr and copies every connection to and from target
// until the test ends.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s again: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}

// syncLog is a log sink safe for the writer's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
