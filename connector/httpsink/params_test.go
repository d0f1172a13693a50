package httpsink

// Parameter decoding and spec-level rejections: defaults, strictness
// (unknown keys name the key), value checks, at_most_once_strategy, the
// registry, the example spec — and that no error, log line or formatted
// Params ever shows a header value.

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/spec"
)

func TestParamsDefaults(t *testing.T) {
	p, err := ParseParams("p", map[string]any{"url": "http://127.0.0.1:1/x", "payload_column": "body"})
	if err != nil {
		t.Fatal(err)
	}
	want := Params{
		URL: "http://127.0.0.1:1/x", PayloadColumn: "body", IdempotencyHeader: "Idempotency-Key",
		KeepAlive: true, MaxIdleConnections: 8, MaxRedirectCount: 0,
		RequestTimeout: spec.Duration(60 * time.Second), AttemptTimeout: spec.Duration(10 * time.Second),
		RetryInitialDelay: spec.Duration(time.Second), RetryMinimumDelay: spec.Duration(100 * time.Millisecond),
		RetryMultiplier: 2, RetryMaximumDelay: spec.Duration(30 * time.Second), RetryJitterRatio: 0.2,
		MaxAttemptCount: 5,
	}
	if fmt.Sprint(p) != fmt.Sprint(want) || p.Headers != nil {
		t.Errorf("defaults\n got %v\nwant %v", p, want)
	}
	// Durations: integer milliseconds (Flow's form) or duration strings.
	p, err = ParseParams("p", map[string]any{"url": "https://h/", "payload_column": "b",
		"request_timeout": 1500, "attempt_timeout": "250ms", "idempotency_header": "", "keep_alive": false,
		"max_attempt_count": 1, "retry_multiplier": 1, "retry_jitter_ratio": 0})
	if err != nil {
		t.Fatal(err)
	}
	if p.RequestTimeout.Std() != 1500*time.Millisecond || p.AttemptTimeout.Std() != 250*time.Millisecond ||
		p.IdempotencyHeader != "" || p.KeepAlive || p.MaxAttemptCount != 1 || p.RetryMultiplier != 1 || p.RetryJitterRatio != 0 {
		t.Errorf("decoded %v", p)
	}
}

func TestUnknownParameterRejected(t *testing.T) {
	_, err := New(connector.SinkParams{Path: "computations.C.sinks.out", Parameters: map[string]any{
		"url": "http://h/", "payload_column": "b", "retry_multiplyer": 3, "bogus": 1}}, Options{})
	if err == nil {
		t.Fatal("unknown keys accepted")
	}
	for _, want := range []string{
		"computations.C.sinks.out.parameters.retry_multiplyer: unknown key",
		"retry_multiplier", // the did-you-mean
		"computations.C.sinks.out.parameters.bogus: unknown key",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestParamsInvalid(t *testing.T) {
	base := func(kv ...any) map[string]any {
		m := map[string]any{"url": "http://h/", "payload_column": "b"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{base("url", nil), "p.url: required key is missing"},
		{base("payload_column", nil), "p.payload_column: required key is missing"},
		{base("payload_column", ""), "p.payload_column: must name"},
		{base("url", "ftp://h/x"), `p.url: scheme must be http or https, got "ftp"`},
		{base("url", "http:///nohost"), "p.url: has no host"},
		{base("url", 5), "p.url: expected a string"},
		{base("max_attempt_count", 0), "p.max_attempt_count: must be at least 1"},
		{base("max_redirect_count", -1), "p.max_redirect_count: must be zero or positive"},
		{base("max_idle_connections", -1), "p.max_idle_connections: must be zero or positive"},
		{base("request_timeout", 0), "p.request_timeout: must be positive"},
		{base("attempt_timeout", "-1s"), "p.attempt_timeout: must be positive"},
		{base("retry_multiplier", 0.5), "p.retry_multiplier: must be at least 1"},
		{base("retry_jitter_ratio", 1.5), "p.retry_jitter_ratio: must be between 0 and 1"},
		{base("retry_minimum_delay", "1m"), "p.retry_maximum_delay: must be at least retry_minimum_delay"},
		{base("retry_initial_delay", "soon"), "p.retry_initial_delay: expected a duration"},
		{base("idempotency_header", "Bad Header"), "p.idempotency_header: \"Bad Header\" is not a valid header name"},
		{base("headers", map[string]any{"Content-Length": "3"}), "p.headers.Content-Length: managed by the sink"},
		{base("headers", map[string]any{"idempotency-key": "x"}), "p.headers.idempotency-key: the sink sets Idempotency-Key"},
		{base("headers", map[string]any{"X-A": "1", "x-a": "2"}), "the same header"},
		{base("headers", map[string]any{"X-A": 1}), "p.headers.X-A: expected a string"},
		{base("headers", []any{"X-A"}), "p.headers: expected a map of header names to string values, got a list"},
	} {
		_, err := ParseParams("p", tc.params)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("params %v: error %v, want it to contain %q", tc.params, err, tc.want)
		}
	}
	// Host is allowed and becomes the request's Host.
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body",
		"headers": map[string]any{"Host": "virtual.example"}}), Options{}, nil)
	d.send(msg("m01", "x"))
	d.runUntil(5*time.Second, "the ack", func() bool { return d.isAcked("m01") })
	if got := rc.requests(); len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
}

func TestAtMostOnceRejected(t *testing.T) {
	const path = "computations.C.sinks.out"
	params := map[string]any{"url": "http://h/", "payload_column": "b"}
	for _, amo := range []*connector.AtMostOnceStrategy{{Enabled: true, TotalQueueBytesLimit: 1 << 20}, {}} {
		s, err := New(connector.SinkParams{Path: path, Parameters: params, AtMostOnce: amo}, Options{})
		if s != nil || !errors.Is(err, ErrAtMostOnceUnsupported) || !strings.HasPrefix(err.Error(), path) {
			t.Fatalf("New with at_most_once_strategy %+v: %v, want an error starting with %q", amo, err, path)
		}
		want := "AsyncHttpSink does not support at_most_once_strategy: POST requests run outside the epoch transaction, " +
			"so the sink is at-least-once; remove at_most_once_strategy"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say why", err)
		}
	}
	// Through the registry, as the engine builds sinks.
	r := connector.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err == nil {
		t.Error("registering the class twice succeeded")
	}
	f, ok := r.Sink(ClassName)
	if !ok {
		t.Fatalf("class %s not registered; classes %v", ClassName, r.SinkClasses())
	}
	s, err := f(connector.SinkParams{Path: path, Parameters: params, AtMostOnce: &connector.AtMostOnceStrategy{Enabled: true}})
	if s != nil || err == nil || !strings.HasPrefix(err.Error(), path+".at_most_once_strategy: AsyncHttpSink does not support") {
		t.Fatalf("factory: %v, %v", s, err)
	}
	s, err = f(connector.SinkParams{Path: path, Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*AsyncHttpSink); !ok {
		t.Fatalf("factory built %T", s)
	}
	if _, ok := s.(connector.PendingSyncer); !ok {
		t.Error("the sink does not report PendingSync: the engine would not record idle progress")
	}
	s.Close()
}

// TestHeaderValuesNeverLeak: header values (and a URL password) never show
// in parameter errors, delivery errors, log lines or a formatted Params.
func TestHeaderValuesNeverLeak(t *testing.T) {
	const secret = "tok-7f3a9-SECRET"
	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, secret) || strings.Contains(s, "pa55word") {
			t.Errorf("%s leaks a secret: %s", what, s)
		}
	}
	for _, params := range []map[string]any{
		{"url": "http://h/", "payload_column": "b", "headers": "Authorization: Bearer " + secret},
		{"url": "http://h/", "payload_column": "b", "headers": map[string]any{"X-Api-Key": secret + "\r\nX-Injected: 1"}},
		{"url": "http://h/", "payload_column": "b", "headers": map[string]any{"Bad Name": secret}},
		{"url": "http://h/", "payload_column": "b", "headers": map[string]any{"Content-Length": secret}},
		{"url": "http://h/", "payload_column": "b", "headers": map[string]any{"Idempotency-Key": secret}},
		{"url": "http://user:pa55word@h/%zz", "payload_column": "b"},
		{"url": "ftp://user:pa55word@h/", "payload_column": "b"},
	} {
		_, err := New(connector.SinkParams{Path: "s", Parameters: params}, Options{})
		if err == nil {
			t.Errorf("params %d accepted", len(params))
			continue
		}
		check("parameter error", err.Error())
		t.Logf("rejected: %v", err)
	}

	p, err := ParseParams("p", map[string]any{"url": "https://user:pa55word@h/", "payload_column": "b",
		"headers": map[string]any{"Authorization": "Bearer " + secret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		s := fmt.Sprintf(f, p)
		check("Params formatted with "+f, s)
		if !strings.Contains(s, "Authorization") {
			t.Errorf("Params formatted with %s does not name the header: %s", f, s)
		}
	}

	// Delivery failures of every kind, with the secret header configured:
	// retried statuses, a timeout, a reset, a refused redirect and a
	// permanent status whose body echoes the header.
	rc := &recorder{respond: func(n int, r *http.Request, w http.ResponseWriter) {
		switch r.URL.Path {
		case "/redirect":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		switch n % 4 {
		case 0:
			http.Error(w, "unavailable, you sent "+r.Header.Get("X-Api-Key"), http.StatusServiceUnavailable)
		case 1:
			time.Sleep(80 * time.Millisecond)
		case 2:
			hijackClose(w)
		default:
			http.Error(w, "rejected key "+r.Header.Get("X-Api-Key"), http.StatusForbidden)
		}
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	for _, path := range []string{"/", "/redirect"} {
		d := startSink(t, fastRetry(map[string]any{"url": srv.URL + path, "payload_column": "body",
			"attempt_timeout": "40ms", "keep_alive": false, "headers": map[string]any{"X-Api-Key": secret}}), Options{}, nil)
		d.send(msg("m01", "x"))
		err := d.waitFailure(10 * time.Second)
		check("Failure()", err.Error())
		check("sink logs", d.logs.all())
		if path == "/" && !strings.Contains(d.logs.all(), "retrying") {
			t.Errorf("no retry was logged; logs:\n%s", d.logs.all())
		}
	}
	for _, r := range rc.requests() {
		if r.Header.Get("X-Api-Key") != secret {
			t.Errorf("the header was not sent to the configured origin")
		}
	}
}

// TestExampleSpec: examples/http-sink/spec.yson parses, validates
// structurally, and its sink's parameters decode.
func TestExampleSpec(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "http-sink", "spec.yson"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.ParseYSON(data)
	if err != nil {
		t.Fatalf("ParseYSON: %v", err)
	}
	if err := p.Validate(nil); err != nil {
		t.Fatalf("Validate(nil): %v", err)
	}
	c := p.Computations["Webhook"]
	if c == nil || c.ComputationClassName != "Passthrough" || c.SourceStreams["queue"] == nil ||
		c.SourceStreams["queue"].SourceClassName != "QueueSource" {
		t.Fatalf("unexpected computation %+v", c)
	}
	sk := c.Sinks["webhook_out"]
	if sk == nil || sk.SinkClassName != ClassName {
		t.Fatalf("sink %+v, want class %s", sk, ClassName)
	}
	sp := connector.SinkParams{SinkID: "webhook_out", Path: "computations.Webhook.sinks.webhook_out",
		Parameters: sk.Parameters}
	if sk.AtMostOnceStrategy != nil {
		sp.AtMostOnce = &connector.AtMostOnceStrategy{}
	}
	s, err := New(sp, Options{})
	if err != nil {
		t.Fatalf("the example's sink does not build: %v", err)
	}
	s.Close()
	if got := s.Params(); got.PayloadColumn != "body" || got.RequestTimeout.Std() != time.Minute {
		t.Errorf("params %v", got)
	}
}
