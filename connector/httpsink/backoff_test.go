package httpsink

// The retry schedule: exponential from retry_initial_delay, capped by
// retry_maximum_delay, jittered by ±retry_jitter_ratio, never below
// retry_minimum_delay; and which failures are retried.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	p := Params{}
	p.SetDefaults()
	w := &writer{p: p}
	for _, tc := range []struct {
		rnd  float64 // 0.5 = no jitter, 0 = -ratio, ~1 = +ratio
		n    int
		want time.Duration
	}{
		{0.5, 1, time.Second},
		{0.5, 2, 2 * time.Second},
		{0.5, 5, 16 * time.Second},
		{0.5, 6, 30 * time.Second}, // 32s capped
		{0.5, 200, 30 * time.Second},
		{0, 1, 800 * time.Millisecond},
		{0, 6, 24 * time.Second},
		{1, 1, 1200 * time.Millisecond},
		{1, 6, 30 * time.Second}, // jitter does not pass the maximum
	} {
		w.rnd = func() float64 { return tc.rnd }
		if got := w.backoff(tc.n); got != tc.want {
			t.Errorf("backoff(%d) with rnd %v = %v, want %v", tc.n, tc.rnd, got, tc.want)
		}
	}
	// The minimum applies after jitter.
	w.p.RetryInitialDelay = p.RetryMinimumDelay / 2
	w.rnd = func() float64 { return 0 }
	if got := w.backoff(1); got != DefaultRetryMinimumDelay {
		t.Errorf("backoff below the minimum = %v, want %v", got, DefaultRetryMinimumDelay)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
		retry  bool
	}{
		{&StatusError{StatusCode: 500}, reasonStatus, true},
		{&StatusError{StatusCode: 503}, reasonStatus, true},
		{&StatusError{StatusCode: 599}, reasonStatus, true},
		{&StatusError{StatusCode: http.StatusRequestTimeout}, reasonStatus, true},
		{&StatusError{StatusCode: http.StatusTooEarly}, reasonStatus, true},
		{&StatusError{StatusCode: http.StatusTooManyRequests}, reasonStatus, true},
		{&StatusError{StatusCode: 400}, reasonStatus, false},
		{&StatusError{StatusCode: 401}, reasonStatus, false},
		{&StatusError{StatusCode: 404}, reasonStatus, false},
		{&StatusError{StatusCode: 409}, reasonStatus, false},
		{&StatusError{StatusCode: 304}, reasonStatus, false},
		{fmt.Errorf("Post: %w", ErrTooManyRedirects), reasonRedirect, false},
		{fmt.Errorf("Post: %w", ErrInsecureRedirect), reasonRedirect, false},
		{fmt.Errorf("Post: %w", ErrRedirectDropsBody), reasonRedirect, false},
		{fmt.Errorf("Post: %w", context.DeadlineExceeded), reasonTimeout, true},
		{errors.New("connection reset by peer"), reasonTransport, true},
	} {
		reason, retry := classify(tc.err)
		if reason != tc.reason || retry != tc.retry {
			t.Errorf("classify(%v) = %s, %v; want %s, %v", tc.err, reason, retry, tc.reason, tc.retry)
		}
	}
}
