package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/transport"
)

// TestFailureLogFirstThenSummaries: a partition's first failure is written
// at once and whole (at most firstBurst per period); repeated failures are
// counted and summarized at most once per period, naming the partitions
// (capped) with their first error line; recovery is written.
func TestFailureLogFirstThenSummaries(t *testing.T) {
	var lines []string
	c := &Controller{
		cfg:        Config{RestartBackoff: time.Second, RestartBackoffMax: 8 * time.Second},
		partitions: map[transport.PartitionID]*partition{},
		flog: newFailureLog(10*time.Second, func(format string, args ...any) {
			lines = append(lines, fmt.Sprintf(format, args...))
		}),
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := func(id string, at time.Duration) {
		p := c.partitions[transport.PartitionID(id)]
		if p == nil {
			p = &partition{spec: plan.PartitionSpec{ID: transport.PartitionID(id)}}
			c.partitions[p.spec.ID] = p
		}
		now := t0.Add(at)
		p.failures++
		p.lastErr = fmt.Errorf("computation C, partition %s, message m%d: boom\n\tat main.f (main.go:1)", id, p.failures)
		p.restartAt = now.Add(c.backoff(p.failures))
		c.logFailure(p, now)
		c.flushFailures(now)
	}
	fail("C/0", 0)
	if len(lines) != 1 || !strings.Contains(lines[0], "partition C/0 failed: computation C, partition C/0, message m1: boom\n\tat main.f") {
		t.Fatalf("first failure: %q", lines)
	}
	for i := 1; i <= 5; i++ {
		fail("C/0", time.Duration(i)*time.Second) // repeats: no line before the period
	}
	for _, id := range []string{"C/1", "C/2", "C/3", "C/4", "C/5"} {
		fail(id, 6*time.Second) // first failures: two more written at once, then the burst is spent
	}
	if len(lines) != 3 {
		t.Fatalf("after repeats and a burst of first failures: %d lines\n%s", len(lines), strings.Join(lines, "\n"))
	}
	c.flushFailures(t0.Add(9 * time.Second))
	if len(lines) != 3 {
		t.Fatalf("a summary came before its period: %q", lines[3:])
	}
	c.flushFailures(t0.Add(11 * time.Second))
	if len(lines) != 4 {
		t.Fatalf("no summary after the period: %d lines", len(lines))
	}
	sum := lines[3]
	for _, w := range []string{"partition C/0: 5 more, 6 in a row", "message m6: boom", "partition C/3: 1 more, 1 in a row", "and 1 more partition(s)", "next attempt in 2s"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	if strings.Contains(sum, "main.f") {
		t.Errorf("the summary repeats stack frames:\n%s", sum)
	}
	c.flushFailures(t0.Add(30 * time.Second))
	if len(lines) != 4 {
		t.Fatalf("a summary without new failures: %q", lines[4:])
	}
	c.logRecovery(c.partitions["C/0"])
	if len(lines) != 5 || !strings.Contains(lines[4], "C/0 runs healthy again after 6 failure(s)") {
		t.Fatalf("recovery: %q", lines[4:])
	}
}
