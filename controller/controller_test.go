package controller

import (
	"testing"
	"time"
)

// TestDrainCheckNeedsTwoQuietSnapshots: a pipeline is drained only after
// two consecutive quiet snapshots with no epoch of work between them; any
// work or a non-quiet snapshot starts over.
func TestDrainCheckNeedsTwoQuietSnapshots(t *testing.T) {
	var d drainCheck
	steps := []struct {
		quiet  bool
		epochs uint64
		want   bool
	}{
		{true, 10, false},  // first quiet snapshot
		{true, 11, false},  // work ran in between: not a stable cut
		{false, 11, false}, // not quiet: start over
		{true, 11, false},
		{true, 11, true},
	}
	for i, s := range steps {
		if got := d.step(s.quiet, s.epochs); got != s.want {
			t.Fatalf("step %d (%+v): drained = %v", i, s, got)
		}
	}
}

// TestBackoffDoublesToCap: RestartBackoff·2^(n-1), capped; negative turns
// it off.
func TestBackoffDoublesToCap(t *testing.T) {
	c := &Controller{cfg: Config{RestartBackoff: time.Second, RestartBackoffMax: 5 * time.Second}}
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := c.backoff(n + 1); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n+1, got, want)
		}
	}
	if got := c.backoff(1000); got != 5*time.Second {
		t.Errorf("backoff(1000) = %v", got)
	}
	c.cfg.RestartBackoff = -1
	if got := c.backoff(3); got != 0 {
		t.Errorf("disabled backoff = %v", got)
	}
	cfg := Config{}
	cfg.defaults()
	if cfg.RestartBackoff != time.Second || cfg.RestartBackoffMax != 30*time.Second {
		t.Errorf("defaults %v/%v, want 1s/30s", cfg.RestartBackoff, cfg.RestartBackoffMax)
	}
}
