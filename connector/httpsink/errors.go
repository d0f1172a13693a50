package httpsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/weir-stream/weir/msgid"
)

// ErrAtMostOnceUnsupported is returned (wrapped, after the sink's spec path)
// by the factory of a sink configured with at_most_once_strategy.
var ErrAtMostOnceUnsupported = errors.New("AsyncHttpSink does not support at_most_once_strategy: " +
	"POST requests run outside the epoch transaction, so the sink is at-least-once; remove at_most_once_strategy")

// Refused redirects. Each fails the attempt permanently: the receiver would
// answer the same request with the same redirect.
var (
	// ErrTooManyRedirects: the response redirects beyond max_redirect_count.
	ErrTooManyRedirects = errors.New("redirect beyond max_redirect_count")
	// ErrInsecureRedirect: an https URL redirects to http, which would send
	// the payload and headers in clear text.
	ErrInsecureRedirect = errors.New("redirect from https to http refused")
	// ErrRedirectDropsBody: a 301, 302 or 303 answer to a POST would be
	// followed with a GET without the body, and its 2xx would acknowledge a
	// message the receiver never got. Only 307 and 308 are followed.
	ErrRedirectDropsBody = errors.New("redirect would turn the POST into a GET without the body (only 307 and 308 are followed)")
)

// StatusError is a final response that is not 2xx. It never carries the
// response body: a receiver may echo request headers there.
type StatusError struct {
	StatusCode int
	Status     string // e.g. "503 Service Unavailable"
}

func (e *StatusError) Error() string { return "HTTP status " + e.Status }

// Retryable reports whether a status may succeed when the same request is
// sent again: 408 Request Timeout, 425 Too Early, 429 Too Many Requests and
// every 5xx. Every other non-2xx status is the receiver's final word on the
// request.
func (e *StatusError) Retryable() bool { return retryableStatus(e.StatusCode) }

func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		return true
	case code >= 500 && code <= 599:
		return true
	}
	return false
}

// DeliveryError is why one message could not be delivered; the writer
// returns it and the sink's Failure reports it. The message stays in the
// outbox and is sent again, with the same Idempotency-Key, when the job
// restarts.
type DeliveryError struct {
	MessageID msgid.ID
	// Attempts is how many requests were sent (0 for a bad payload).
	Attempts int
	// Permanent: the failure is not retried (a non-retryable status, a
	// refused redirect, a bad payload); otherwise retries ran out.
	Permanent bool
	// Why retries stopped, when not permanent: "max_attempt_count 5
	// reached" or "request_timeout 1m0s exhausted".
	Stop string
	// Err is the last attempt's failure.
	Err error
}

func (e *DeliveryError) Error() string {
	switch {
	case e.Attempts == 0:
		return fmt.Sprintf("message %s: %v", e.MessageID, e.Err)
	case e.Permanent:
		return fmt.Sprintf("message %s: permanent failure after %d attempt(s), not retried: %v", e.MessageID, e.Attempts, e.Err)
	}
	return fmt.Sprintf("message %s: %d attempt(s) failed, %s: %v", e.MessageID, e.Attempts, e.Stop, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Failure reasons, the "reason" label of
// weir_http_sink_attempt_failures_total.
const (
	reasonStatus    = "status"
	reasonRedirect  = "redirect"
	reasonTimeout   = "timeout"
	reasonTransport = "transport"
)

// classify says why an attempt failed and whether sending the same request
// again may help. It is the one place that decides retries.
func classify(err error) (reason string, retry bool) {
	var se *StatusError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		// The receiver answered: only statuses that mean "not now" are
		// worth repeating.
		return reasonStatus, se.Retryable()
	case errors.Is(err, ErrTooManyRedirects), errors.Is(err, ErrInsecureRedirect), errors.Is(err, ErrRedirectDropsBody):
		// The receiver would redirect the same way again.
		return reasonRedirect, false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		// Attempt or request deadline, dial or TLS handshake timeout. The
		// request may have been applied: the retry carries the same key.
		return reasonTimeout, true
	default:
		// Connection refused or reset, closed before or during the
		// response, TLS and protocol errors: possibly transient, and if
		// the request was applied the retry carries the same key.
		return reasonTransport, true
	}
}
