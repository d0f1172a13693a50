package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/internal/testconn"
)

// slowListing is a source whose partition listings, after the first,
// block until released: a Kafka metadata call that takes 30 seconds.
type slowListing struct {
	*testconn.Source
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	calls   int
}

func (s *slowListing) Partitions(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if !first {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Source.Partitions(ctx)
}

func (s *slowListing) unblock() { s.once.Do(func() { close(s.release) }) }

// TestSlowSourceListingExpiresNoLease (issue 11, scenario 9): a source
// listing that takes longer than the lease timeout must not hold up the
// controller's cycles: they keep pinging leases, no lease expires and no
// job restarts; the listing's result is used once it arrives (a partition
// that appeared meanwhile gets a job).
func TestSlowSourceListingExpiresNoLease(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const n = 200
	h := New(t, Options{Seed: 35, Messages: n, Clock: clk, SourceRelistPeriod: 2 * time.Second})
	h.Source.Infinite = true
	slow := &slowListing{Source: h.Source, release: make(chan struct{})}
	defer slow.unblock()
	h.Plan.Computations["Reader"].Source = slow
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.total(ctx) == n }, nil); err != nil {
		t.Fatal(err)
	}
	before := h.Ctl.Stats()
	h.Source.Append("p5", weir.Row{"key": "late", "seq": int64(n)})
	h.Expected["late"] = 1

	// 12 s of store time in 250 ms cycles: the listing starts after 2 s and
	// blocks for the rest, longer than the 5 s lease timeout.
	for i := 0; i < 48; i++ {
		clk.Advance(250 * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- h.Cycle(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			slow.unblock()
			<-done
			t.Fatal("a controller cycle blocked on the source listing: the listing runs under the controller's lock")
		}
		// Let every job report at the new time, as running jobs do between
		// cycles (a job silent for the lost-job timeout is replaced).
		at := clk.Now()
		if err := h.RunUntil(ctx, 10*time.Second, func() bool { return h.allReported(at) }, nil); err != nil {
			t.Fatal(err)
		}
	}
	after := h.Ctl.Stats()
	if after.LeasesExpired != before.LeasesExpired || after.JobsStarted != before.JobsStarted || after.JobsLost != before.JobsLost {
		t.Fatalf("jobs restarted while a listing was slow: before %+v, after %+v\nlogs:\n%s", before, after, tail(h.Logs(), 20))
	}
	slow.mu.Lock()
	calls := slow.calls
	slow.mu.Unlock()
	if calls < 2 {
		t.Fatalf("the sources were listed %d times; the slow re-listing never started", calls)
	}
	slow.unblock()
	if err := h.RunUntil(ctx, 30*time.Second, func() bool { return h.total(ctx) == n+1 }, func() { clk.Advance(100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	h.RequireExactlyOnce(ctx)
}
