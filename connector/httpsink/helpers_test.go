package httpsink

// Test helpers: a driver that plays the engine's part for one sink instance
// (Distribute, then epochs of Sync + Commit, with the sink state kept between
// "job lives"), a log capture, and a recording receiver. Every test sends
// real requests to a net/http server on 127.0.0.1.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// logs captures log lines (the sink's and the engine's).
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// driver runs one sink instance the way a job does.
type driver struct {
	t     *testing.T
	s     *AsyncHttpSink
	logs  *logs
	state *[]byte // the sink's persisted state, shared across lives

	mu    sync.Mutex
	acked map[msgid.ID]bool
}

// fastRetry are retry parameters that keep tests quick.
func fastRetry(p map[string]any) map[string]any {
	out := map[string]any{
		"retry_initial_delay": "2ms",
		"retry_minimum_delay": "1ms",
		"retry_maximum_delay": "20ms",
		"attempt_timeout":     "2s",
		"request_timeout":     "5s",
	}
	for k, v := range p {
		out[k] = v
	}
	return out
}

// startSink builds and inits a sink from params; state carries the
// persisted sink state from an earlier life (nil for the first).
func startSink(t *testing.T, params map[string]any, o Options, state *[]byte) *driver {
	t.Helper()
	s, err := New(connector.SinkParams{SinkID: t.Name(), Path: "computations.C.sinks.out", Parameters: params}, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if state == nil {
		state = new([]byte)
	}
	d := &driver{t: t, s: s, logs: &logs{}, state: state, acked: map[msgid.ID]bool{}}
	err = s.Init(context.Background(), connector.SinkContext{
		PartitionID: "C/0",
		SinkID:      "out",
		LoadState: func(context.Context) ([]byte, error) {
			if *d.state == nil {
				return nil, nil
			}
			return append([]byte(nil), *d.state...), nil
		},
		SaveState: func(_ *store.Txn, b []byte) { *d.state = append([]byte(nil), b...) },
		Logf:      d.logs.logf,
	})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return d
}

// send distributes msgs and commits the epoch, which starts their delivery.
func (d *driver) send(msgs ...*weir.Message) {
	for _, m := range msgs {
		id := m.ID
		d.s.Distribute(m, func(err error) {
			if err != nil {
				d.t.Errorf("message %s: done(%v)", id, err)
				return
			}
			d.mu.Lock()
			d.acked[id] = true
			d.mu.Unlock()
		})
	}
	d.s.Commit(context.Background())
}

// epoch runs one empty epoch: Sync records what was written, Commit acks
// what the previous epoch recorded.
func (d *driver) epoch() {
	if err := d.s.Sync(context.Background(), store.NewTxn()); err != nil {
		d.t.Fatalf("Sync: %v", err)
	}
	d.s.Commit(context.Background())
}

func (d *driver) isAcked(id msgid.ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked[id]
}

// runUntil runs epochs until cond holds, failing after timeout.
func (d *driver) runUntil(timeout time.Duration, what string, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out waiting for %s; status %+v; logs:\n%s", what, d.s.Status(), d.logs.all())
		}
		d.epoch()
		time.Sleep(time.Millisecond)
	}
}

// waitFailure waits until delivery stops and returns the failure.
func (d *driver) waitFailure(timeout time.Duration) error {
	d.t.Helper()
	d.runUntil(timeout, "a delivery failure", func() bool { return d.s.Failure() != nil })
	return d.s.Failure()
}

// close ends this life of the sink (a job restart).
func (d *driver) close() {
	if err := d.s.Close(); err != nil {
		d.t.Errorf("Close: %v", err)
	}
}

func msg(id string, payload any) *weir.Message {
	return &weir.Message{ID: msgid.ID(id), Stream: "bodies", Payload: weir.Row{"body": payload}}
}

// request is one request a recorder saw.
type request struct {
	Path, Key, Body string
	Header          http.Header
}

// recorder is a receiver that records requests and answers with respond
// (200 when nil).
type recorder struct {
	mu      sync.Mutex
	reqs    []request
	respond func(n int, r *http.Request, w http.ResponseWriter) // n: 0-based request index
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.reqs)
	rc.reqs = append(rc.reqs, request{Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"), Body: string(body), Header: r.Header.Clone()})
	respond := rc.respond
	rc.mu.Unlock()
	if respond != nil {
		respond(n, r, w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (rc *recorder) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// TestFailureWhileInit: a sink's Failure may be asked (by a status, or an
// operator's tool) from another goroutine while a restarted life's Init
// runs; under -race that must not be a data race (it was: the outage
// tracker was a plain field set in Init).
func TestFailureWhileInit(t *testing.T) {
	s, err := New(connector.SinkParams{SinkID: t.Name(), Path: "computations.C.sinks.out", Parameters: fastRetry(map[string]any{"url": "http://127.0.0.1:1/ingest", "payload_column": "body"})}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if err := s.Failure(); err != nil {
				t.Errorf("Failure before any write: %v", err)
				return
			}
		}
	}()
	err = s.Init(context.Background(), connector.SinkContext{
		PartitionID: "C/0", SinkID: "out",
		LoadState: func(context.Context) ([]byte, error) { return nil, nil },
		SaveState: func(*store.Txn, []byte) {},
	})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
