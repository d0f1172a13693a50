package httpsink

// Sink-level tests against real HTTP servers on 127.0.0.1: what is sent
// (body, idempotency key, headers), what is acknowledged (only a contiguous
// prefix of 2xx answers and null payloads), what stops progress without
// losing the message (permanent statuses, exhausted retries, a bad payload),
// and that a restart re-sends with the same key.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/msgid"
)

func TestDeliversInOrderWithStableKey(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL + "/hook", "payload_column": "body",
		"headers": map[string]any{"Content-Type": "application/json"}}), Options{}, nil)
	d.send(msg("m01", `{"a":1}`), msg("m02", []byte("raw\x00bytes")), msg("m03", "three"))
	d.runUntil(10*time.Second, "3 acks", func() bool { return d.isAcked("m03") })
	got := rc.requests()
	if len(got) != 3 {
		t.Fatalf("got %d requests, want 3", len(got))
	}
	for i, want := range []struct{ id, body string }{{"m01", `{"a":1}`}, {"m02", "raw\x00bytes"}, {"m03", "three"}} {
		r := got[i]
		if r.Body != want.body || r.Key != IdempotencyKey(msgid.ID(want.id)) || r.Path != "/hook" {
			t.Errorf("request %d = %+v, want body %q key %q", i, r, want.body, IdempotencyKey(msgid.ID(want.id)))
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d Content-Type = %q", i, ct)
		}
	}
	if k := IdempotencyKey("m01"); k != "6d3031" {
		t.Errorf("IdempotencyKey(m01) = %q, want hex of the id bytes 6d3031", k)
	}
	if st := d.s.Status(); st.Delivered != 3 || st.Attempts != 3 || st.Pending != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestNullPayloadAckedWithoutRequest: a null or missing payload column
// acknowledges the message without a request, in its place in the order.
func TestNullPayloadAckedWithoutRequest(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body"}), Options{}, nil)
	missing := msg("m02", nil)
	delete(missing.Payload, "body")
	d.send(msg("m01", nil), missing, msg("m03", "x"))
	d.runUntil(10*time.Second, "3 acks", func() bool { return d.isAcked("m01") && d.isAcked("m02") && d.isAcked("m03") })
	if got := rc.requests(); len(got) != 1 || got[0].Body != "x" {
		t.Fatalf("requests %+v, want only the one for m03", got)
	}
	if st := d.s.Status(); st.Skipped != 2 || st.Delivered != 1 {
		t.Errorf("status %+v, want 2 skipped, 1 delivered", st)
	}
}

// TestPermanentStatusStopsProgress: a 400 is not retried; the partition's
// delivery stops visibly (Failure), the message and the ones after it stay
// unacknowledged, and a restart re-sends it with the same key.
func TestPermanentStatusStopsProgress(t *testing.T) {
	var reject atomic.Bool
	reject.Store(true)
	rc := &recorder{respond: func(_ int, r *http.Request, w http.ResponseWriter) {
		if reject.Load() && r.Header.Get("Idempotency-Key") == IdempotencyKey("m02") {
			http.Error(w, "bad request: echoing X-Token "+r.Header.Get("X-Token"), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	params := fastRetry(map[string]any{"url": srv.URL, "payload_column": "body",
		"headers": map[string]any{"X-Token": "hunter2-secret"}, "max_attempt_count": 5})
	var state []byte
	d := startSink(t, params, Options{}, &state)
	d.send(msg("m01", "one"), msg("m02", "two"), msg("m03", "three"))
	err := d.waitFailure(10 * time.Second)
	var de *DeliveryError
	var se *StatusError
	if !errors.As(err, &de) || !de.Permanent || de.MessageID != "m02" || de.Attempts != 1 ||
		!errors.As(err, &se) || se.StatusCode != 400 {
		t.Fatalf("Failure() = %v, want a permanent DeliveryError for m02 with status 400 after 1 attempt", err)
	}
	d.runUntil(5*time.Second, "the ack of m01", func() bool { return d.isAcked("m01") })
	for i := 0; i < 20; i++ {
		d.epoch()
	}
	if d.isAcked("m02") || d.isAcked("m03") {
		t.Fatal("a message at or after the failed one was acknowledged")
	}
	if p := d.s.Pending(); p != 2 {
		t.Errorf("Pending() = %d, want 2 (m02 and m03 kept)", p)
	}
	if n := len(rc.requests()); n != 2 {
		t.Errorf("%d requests, want 2: m03 must not be sent after m02 failed", n)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(d.logs.all(), "hunter2") {
		t.Errorf("the header value leaked: %v\n%s", err, d.logs.all())
	}

	// Restart: the outbox re-sends m02 and m03 (m01 was recorded).
	d.close()
	reject.Store(false)
	d2 := startSink(t, params, Options{}, &state)
	d2.send(msg("m02", "two"), msg("m03", "three"))
	d2.runUntil(10*time.Second, "acks after restart", func() bool { return d2.isAcked("m02") && d2.isAcked("m03") })
	var keys []string
	for _, r := range rc.requests() {
		if r.Body == "two" {
			keys = append(keys, r.Key)
		}
	}
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("m02 was sent with keys %v, want the same key twice", keys)
	}
}

// TestWrongPayloadTypeStopsProgress: a payload that is neither string nor
// bytes is a permanent failure naming the message and the column.
func TestWrongPayloadTypeStopsProgress(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body"}), Options{}, nil)
	d.send(msg("m01", int64(7)), msg("m02", "ok"))
	err := d.waitFailure(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "m01") || !strings.Contains(err.Error(), `"body"`) || !strings.Contains(err.Error(), "int64") {
		t.Fatalf("Failure() = %v, want an error naming message m01, column \"body\" and the type", err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("%d requests sent, want 0", n)
	}
}

// TestRetriesThenSucceeds: 503, 429 and a reset are retried with the same
// key until a 2xx.
func TestRetriesThenSucceeds(t *testing.T) {
	rc := &recorder{respond: func(n int, r *http.Request, w http.ResponseWriter) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			hijackClose(w)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// keep_alive off: a reset on a fresh connection is not replayed by
	// net/http itself, so the sink sees each failure.
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body", "keep_alive": false}), Options{}, nil)
	d.send(msg("m01", "x"))
	d.runUntil(10*time.Second, "the ack", func() bool { return d.isAcked("m01") })
	got := rc.requests()
	if len(got) != 4 {
		t.Fatalf("%d requests, want 4", len(got))
	}
	for _, r := range got {
		if r.Key != IdempotencyKey("m01") || r.Body != "x" {
			t.Errorf("request %+v, want the same key and body every time", r)
		}
	}
	if st := d.s.Status(); st.Retries != 3 || st.AttemptFailures != 3 {
		t.Errorf("status %+v, want 3 retries and 3 failures", st)
	}
}

// TestRetriesExhausted: a message failing max_attempt_count times stops
// progress without being lost; a slow receiver fails attempts by
// attempt_timeout.
func TestRetriesExhausted(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		rc := &recorder{respond: func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }}
		srv := httptest.NewServer(rc)
		defer srv.Close()
		d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body", "max_attempt_count": 3}), Options{}, nil)
		d.send(msg("m01", "x"))
		err := d.waitFailure(10 * time.Second)
		var de *DeliveryError
		if !errors.As(err, &de) || de.Permanent || de.Attempts != 3 || !strings.Contains(err.Error(), "max_attempt_count 3") {
			t.Fatalf("Failure() = %v, want retries exhausted after 3 attempts", err)
		}
		if n := len(rc.requests()); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
		if d.isAcked("m01") || d.s.Pending() != 1 {
			t.Errorf("acked=%v pending=%d: the message must stay", d.isAcked("m01"), d.s.Pending())
		}
	})
	t.Run("attempt_timeout", func(t *testing.T) {
		rc := &recorder{respond: func(_ int, r *http.Request, w http.ResponseWriter) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			w.WriteHeader(http.StatusOK)
		}}
		srv := httptest.NewServer(rc)
		defer srv.Close()
		d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body",
			"max_attempt_count": 2, "attempt_timeout": "50ms"}), Options{}, nil)
		d.send(msg("m01", "x"))
		err := d.waitFailure(10 * time.Second)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Failure() = %v, want a deadline error", err)
		}
		if r, _ := classify(err); r != reasonTimeout {
			t.Errorf("reason %q, want %q", r, reasonTimeout)
		}
	})
	t.Run("request_timeout", func(t *testing.T) {
		rc := &recorder{respond: func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }}
		srv := httptest.NewServer(rc)
		defer srv.Close()
		d := startSink(t, map[string]any{"url": srv.URL, "payload_column": "body", "max_attempt_count": 100,
			"request_timeout": "300ms", "retry_initial_delay": "100ms", "retry_jitter_ratio": 0}, Options{}, nil)
		d.send(msg("m01", "x"))
		err := d.waitFailure(10 * time.Second)
		if err == nil || !strings.Contains(err.Error(), "request_timeout 300ms exhausted") {
			t.Fatalf("Failure() = %v, want request_timeout exhausted", err)
		}
		if n := len(rc.requests()); n < 2 || n > 3 {
			t.Errorf("%d requests within 300ms at 100ms, 200ms pauses; want 2", n)
		}
	})
}

// TestIdempotencyHeaderDisabled: idempotency_header = "" sends no key.
func TestIdempotencyHeaderDisabled(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body", "idempotency_header": ""}), Options{}, nil)
	d.send(msg("m01", "x"))
	d.runUntil(10*time.Second, "the ack", func() bool { return d.isAcked("m01") })
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	for name, vs := range got[0].Header {
		for _, v := range vs {
			if v == IdempotencyKey("m01") {
				t.Errorf("header %s carries the message id although idempotency_header is empty", name)
			}
		}
	}
	if got[0].Key != "" {
		t.Errorf("Idempotency-Key = %q, want none", got[0].Key)
	}

	// A custom name is used instead of the default.
	rc2 := &recorder{}
	srv2 := httptest.NewServer(rc2)
	defer srv2.Close()
	d2 := startSink(t, fastRetry(map[string]any{"url": srv2.URL, "payload_column": "body", "idempotency_header": "X-Dedup-Id"}), Options{}, nil)
	d2.send(msg("m01", "x"))
	d2.runUntil(10*time.Second, "the ack", func() bool { return d2.isAcked("m01") })
	if r := rc2.requests()[0]; r.Header.Get("X-Dedup-Id") != IdempotencyKey("m01") || r.Key != "" {
		t.Errorf("headers %v, want X-Dedup-Id only", r.Header)
	}
}

// hijackClose drops the connection without an answer (after the handler
// has read, i.e. applied, the request).
func hijackClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if c, _, err := hj.Hijack(); err == nil {
		c.Close()
	}
}

// TestReloadedOutputsAskForAnEpoch: after a restart the job Distributes the
// reloaded outbox in Init and may then stay idle (upstream finished). The
// sink must ask for an epoch (PendingSync) so that Commit starts sending;
// otherwise the outputs would wait forever.
func TestReloadedOutputsAskForAnEpoch(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body"}), Options{}, nil)
	if d.s.PendingSync() {
		t.Fatal("a fresh sink asks for an epoch")
	}
	id := msgid.ID("m01")
	d.s.Distribute(msg(string(id), "x"), func(error) {})
	if !d.s.PendingSync() {
		t.Fatal("a registered message does not ask for the epoch that would start sending it")
	}
	// An engine that commits only when there is work.
	deadline := time.Now().Add(10 * time.Second)
	for len(rc.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never sent")
		}
		if d.s.PendingSync() {
			d.epoch()
		}
		time.Sleep(time.Millisecond)
	}
	if got := rc.requests()[0].Key; got != IdempotencyKey(id) {
		t.Errorf("key %q", got)
	}
}
