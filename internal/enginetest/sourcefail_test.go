package enginetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/testconn"
)

// unreachableSource is a source whose partition listings fail until
// reachable is set, recording when (store clock) each listing ran.
type unreachableSource struct {
	*testconn.Source
	clk clock.Clock

	mu        sync.Mutex
	reachable bool
	calls     []time.Time
}

func (s *unreachableSource) Partitions(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	s.calls = append(s.calls, s.clk.Now())
	ok := s.reachable
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")
	}
	return s.Source.Partitions(ctx)
}

func (s *unreachableSource) listings() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls...)
}

// TestUnlistableSourceRetriedWithBackoff (issue 13 item 2): a source whose
// partitions cannot be listed is an error, never an empty source. The
// pipeline does not complete (nor drain) while it fails; the listing is
// retried in the background with the restart backoff (1s, 2s, 4s, capped
// at 4s), not every cycle; the controller reports it (Sources) and warns once, not per
// retry; once the source answers, the pipeline completes exactly once and
// the recovery is reported.
func TestUnlistableSourceRetriedWithBackoff(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := New(t, Options{Seed: 44, Clock: clk, RestartBackoff: time.Second, RestartBackoffMax: 4 * time.Second})
	src := &unreachableSource{Source: h.Source, clk: clk}
	h.Plan.Computations["Reader"].Source = src
	h.Ctl = h.NewController()
	// 14 s of store time in 100 ms steps. Each failed listing schedules the
	// next one after the backoff: the gaps between a failure and its retry
	// time must be 1s, 2s, 4s, 4s, ...
	var gaps []time.Duration
	failures := 0
	for i := 0; i < 140; i++ {
		if err := h.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		if s := h.Ctl.State(); s == controller.Completed {
			t.Fatal("the pipeline completed while its source could not be listed")
		}
		if srcs := h.Ctl.Sources(); len(srcs) == 1 && srcs[0].ConsecutiveFailures > failures {
			failures = srcs[0].ConsecutiveFailures
			gaps = append(gaps, srcs[0].RetryAt.Sub(*srcs[0].LastErrorAt))
		}
		clk.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond) // not synchronisation: a listing taken a cycle late only shifts the next
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	if n := len(src.listings()); len(gaps) < 3 || len(gaps) > 6 || n < failures || n > failures+1 {
		t.Fatalf("%d listings, %d failures, retry gaps %v in 14s; want 3 to 6 with gaps %v…", len(src.listings()), failures, gaps, want)
	}
	for i, g := range gaps {
		if w := want[min(i, len(want)-1)]; g != w {
			t.Fatalf("retry gaps %v, want %v…", gaps, want)
		}
	}
	srcs := h.Ctl.Sources()
	if len(srcs) != 1 || srcs[0].Computation != "Reader" || srcs[0].Listed || !strings.Contains(srcs[0].LastError, "connection refused") {
		t.Fatalf("Sources() = %+v, want Reader unlisted with its error", srcs)
	}
	if c := strings.Count(h.Logs(), "warn: cannot list the partitions of Reader's source"); c != 1 {
		t.Fatalf("the listing failure was warned %d times, want once (then summaries)\n%s", c, h.Logs())
	}
	if !strings.Contains(h.Logs(), "warn: more failures since") {
		t.Errorf("no summary of the repeated failures:\n%s", h.Logs())
	}

	// A drain cannot finish while the source is not listed.
	if err := h.Ctl.SetTarget(controller.Stopped); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := h.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := h.Ctl.State(); s != controller.Draining {
		t.Fatalf("state %s while the source is not listed, want draining", s)
	}
	if err := h.Ctl.SetTarget(controller.Working); err != nil {
		t.Fatal(err)
	}

	src.mu.Lock()
	src.reachable = true
	src.mu.Unlock()
	if err := h.RunUntil(ctx, 60*time.Second, func() bool { return h.Ctl.State() == controller.Completed },
		func() { clk.Advance(100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	h.RequireExactlyOnce(ctx)
	if !strings.Contains(h.Logs(), "warn: the partitions of Reader's source are listed again") {
		t.Errorf("the recovery was not reported:\n%s", h.Logs())
	}
}
