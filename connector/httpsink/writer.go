package httpsink

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
)

// IdempotencyKey is the value of the idempotency header for a message: the
// hex of its id's bytes. Message ids are stable across retries, replays and
// restarts, so every request for one message carries the same key.
func IdempotencyKey(id msgid.ID) string { return hex.EncodeToString([]byte(id)) }

// drainLimit bounds how much of an error response's body is read so that
// the connection can be reused; a longer body costs a new connection.
const drainLimit = 64 << 10

// writer is the connector.AsyncWriter of AsyncHttpSink: one POST per
// message, in the order given, each retried per the parameters.
//
// Invariant: Write returns n only when messages [0, n) were each answered
// with a 2xx whose body was read to the end, or skipped for a null payload.
type writer struct {
	p         Params
	target    string      // the url, as configured
	origin    string      // scheme://host[:port] of the url
	header    http.Header // configured headers, canonical names
	host      string      // Host override from headers, or ""
	idem      string      // canonical idempotency header name, or ""
	transport *http.Transport
	client    *http.Client
	metrics   *sinkMetrics

	// logf and outage are set before the delivery loop starts (Init) and
	// not changed after. outage reports attempts that could not reach the
	// receiver (connector.Outage); it is read through an atomic pointer
	// because Failure (the sink's status) may be asked from another
	// goroutine while Init runs (nil before Init: no failure).
	logf   func(format string, args ...any)
	outage atomic.Pointer[connector.Outage]
	// sleep waits between attempts, honouring ctx; rnd returns a number in
	// [0, 1) for jitter. Tests may replace both before the first Write.
	sleep func(ctx context.Context, d time.Duration) error
	rnd   func() float64

	stats struct {
		attempts, failures, retries, delivered, skipped atomic.Int64
	}
}

var _ connector.AsyncWriter = (*writer)(nil)

func newWriter(p Params, sinkID string, tlsConfig *tls.Config) (*writer, error) {
	u, err := url.Parse(p.URL)
	if err != nil {
		// ParseParams rejected it already; do not quote it (it may hold a
		// password).
		return nil, fmt.Errorf("httpsink: url does not parse")
	}
	w := &writer{
		p:       p,
		target:  p.URL,
		origin:  u.Scheme + "://" + u.Host,
		header:  http.Header{},
		metrics: newSinkMetrics(sinkID),
		logf:    func(string, ...any) {},
		sleep:   sleepCtx,
		rnd:     rand.Float64,
	}
	for name, v := range p.Headers {
		if http.CanonicalHeaderKey(name) == "Host" {
			w.host = v
			continue
		}
		w.header.Set(name, v)
	}
	if p.IdempotencyHeader != "" {
		w.idem = http.CanonicalHeaderKey(p.IdempotencyHeader)
	}
	w.transport = &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          p.MaxIdleConnections,
		MaxIdleConnsPerHost:   p.MaxIdleConnections,
		DisableKeepAlives:     !p.KeepAlive || p.MaxIdleConnections == 0,
	}
	if tlsConfig != nil {
		w.transport.TLSClientConfig = tlsConfig.Clone()
	}
	w.client = &http.Client{Transport: w.transport, CheckRedirect: w.checkRedirect}
	return w, nil
}

// Write implements connector.AsyncWriter. HTTP has no producer session: the
// receiver deduplicates by the idempotency key (the message id), and the
// sequence numbers only fix the order, which is the order of msgs.
func (w *writer) Write(ctx context.Context, _ connector.ProducerID, _ connector.SeqNo, msgs []*weir.Message) (int, error) {
	for i, m := range msgs {
		if err := w.deliver(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// deliver sends one message, retrying per the parameters. It returns nil
// once the receiver answered 2xx (or the payload is null), ctx's error if the
// sink is closing, and otherwise a *DeliveryError.
func (w *writer) deliver(ctx context.Context, m *weir.Message) error {
	body, ok, err := w.payload(m)
	if err != nil {
		return &DeliveryError{MessageID: m.ID, Permanent: true, Err: err}
	}
	if !ok {
		w.stats.skipped.Add(1)
		return nil
	}
	key := ""
	if w.idem != "" {
		key = IdempotencyKey(m.ID)
	}
	rctx, cancel := context.WithTimeout(ctx, w.p.RequestTimeout.Std())
	defer cancel()
	deadline, _ := rctx.Deadline()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			w.stats.retries.Add(1)
		}
		err := w.attempt(rctx, body, key)
		if err == nil {
			w.stats.delivered.Add(1)
			w.outage.Load().Recovered()
			return nil
		}
		if ctx.Err() != nil {
			// The sink is closing (the job stops): not a delivery failure.
			// The message stays in the outbox for the next job.
			return ctx.Err()
		}
		reason, retry := classify(err)
		if reason == reasonTransport || reason == reasonTimeout {
			// No answer: the sink reports it at once (its Failure), so
			// the partition's job stops visibly and restarts with backoff.
			w.outage.Load().Failed(w.origin, err)
		} else {
			w.outage.Load().Recovered() // the receiver answered
		}
		w.stats.failures.Add(1)
		w.metrics.attemptFailure(reason)
		de := &DeliveryError{MessageID: m.ID, Attempts: attempt, Err: err}
		if !retry {
			de.Permanent = true
			return de
		}
		if attempt >= w.p.MaxAttemptCount {
			de.Stop = fmt.Sprintf("max_attempt_count %d reached", w.p.MaxAttemptCount)
			return de
		}
		d := w.backoff(attempt)
		if time.Until(deadline) <= d {
			de.Stop = fmt.Sprintf("request_timeout %v exhausted", w.p.RequestTimeout)
			return de
		}
		w.logf("message %s: attempt %d of %d failed (%s): %v; retrying in %v",
			m.ID, attempt, w.p.MaxAttemptCount, reason, err, d.Round(time.Millisecond))
		if err := w.sleep(rctx, d); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			de.Stop = fmt.Sprintf("request_timeout %v exhausted", w.p.RequestTimeout)
			return de
		}
	}
}

// payload returns the request body of m: the payload column's bytes. ok is
// false for a null or missing column (acknowledged without a request).
func (w *writer) payload(m *weir.Message) (body []byte, ok bool, err error) {
	v := m.Payload[w.p.PayloadColumn]
	switch x := v.(type) {
	case nil:
		return nil, false, nil
	case string:
		return []byte(x), true, nil
	case []byte:
		return x, true, nil
	}
	return nil, false, fmt.Errorf("payload column %q holds a value of type %T; it must be a string or bytes (null skips the message)",
		w.p.PayloadColumn, v)
}

// attempt sends one request and reads the whole response. It returns nil
// only for a 2xx whose body was read to the end.
func (w *writer) attempt(ctx context.Context, body []byte, key string) error {
	actx, cancel := context.WithTimeout(ctx, w.p.AttemptTimeout.Std())
	defer cancel()
	// bytes.Reader lets net/http set Content-Length and GetBody (needed to
	// re-send the body on a 307/308 and on its own transparent retries).
	req, err := http.NewRequestWithContext(actx, http.MethodPost, w.target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("httpsink: build request: %w", err)
	}
	for k, vs := range w.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if w.host != "" {
		req.Host = w.host
	}
	if key != "" {
		req.Header.Set(w.idem, key)
	}
	w.stats.attempts.Add(1)
	resp, err := w.client.Do(req)
	if resp != nil {
		// With an error, resp is the redirect that was refused (its body
		// already closed); it is a response all the same.
		w.metrics.response(resp.StatusCode)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	}
	// A 2xx counts only once the whole body arrived: a connection cut in
	// the middle of it leaves the outcome as unknown as no answer at all.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("reading the body of a %s response: %w", resp.Status, err)
	}
	return nil
}

// checkRedirect is the client's redirect policy; see the package comment
// (max_redirect_count). req is the next request, via the ones already made.
func (w *writer) checkRedirect(req *http.Request, via []*http.Request) error {
	if req.Method != http.MethodPost {
		return ErrRedirectDropsBody
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return ErrInsecureRedirect
	}
	if len(via) > w.p.MaxRedirectCount {
		return fmt.Errorf("%w (%d)", ErrTooManyRedirects, w.p.MaxRedirectCount)
	}
	if req.URL.Scheme+"://"+req.URL.Host != w.origin {
		// net/http copies every header to the next hop and drops only
		// Authorization, Cookie and WWW-Authenticate across domains. The
		// configured headers may hold other credentials (an API key):
		// they go to the configured origin only. The idempotency key is not
		// a secret and the next hop needs it.
		for k := range w.header {
			req.Header.Del(k)
		}
	}
	return nil
}

// backoff is the pause after failed attempt n (n ≥ 1):
// retry_initial_delay × retry_multiplier^(n-1), at most retry_maximum_delay,
// times a random factor in [1-jitter, 1+jitter], then clamped to
// [retry_minimum_delay, retry_maximum_delay].
func (w *writer) backoff(n int) time.Duration {
	maxD := float64(w.p.RetryMaximumDelay)
	d := float64(w.p.RetryInitialDelay) * math.Pow(w.p.RetryMultiplier, float64(n-1))
	if d > maxD || math.IsInf(d, 0) || math.IsNaN(d) {
		d = maxD
	}
	if j := w.p.RetryJitterRatio; j > 0 {
		d *= 1 + j*(2*w.rnd()-1)
	}
	d = min(max(d, float64(w.p.RetryMinimumDelay)), maxD)
	return time.Duration(d)
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
