package controller

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir/transport"
)

// failureLog tells the operator about job failures through Config.Warnf
// (stderr of 'weir run', verbose or not) without flooding it: a failing
// job restarts with backoff, and a poison message fails it every time.
//
//   - A partition's first failure (after a healthy run) is written at once,
//     whole: its error names the computation, the partition and the input
//     (and, for a panic, the user code's frames). At most firstBurst such
//     lines are written per FailureLogPeriod; more go to the summary.
//   - Further failures are counted and summarized at most once per
//     FailureLogPeriod: how many, on which partitions, each with its
//     consecutive failures, next attempt and the first line of its error.
//   - A partition that runs healthy again after failures says so.
type failureLog struct {
	period time.Duration
	warnf  func(format string, args ...any)

	// windowAt starts the current period; firsts counts the first
	// failures written in it.
	windowAt time.Time
	firsts   int
	// pending: partitions with failures not yet written, and how many;
	// pendingSources: the same for source computations' listings.
	pending        map[transport.PartitionID]int
	pendingSources map[string]int
	// summaryAt is when the last summary was written.
	summaryAt time.Time
}

// firstBurst bounds the first-failure lines per period.
const firstBurst = 3

// maxSummaryPartitions bounds the partitions a summary names.
const maxSummaryPartitions = 3

// maxSummaryError bounds the error text a summary repeats per partition.
const maxSummaryError = 200

func newFailureLog(period time.Duration, warnf func(string, ...any)) failureLog {
	return failureLog{period: period, warnf: warnf, pending: map[transport.PartitionID]int{}, pendingSources: map[string]int{}}
}

// first reports whether a first failure may be written now (at most
// firstBurst per period), and counts it.
func (l *failureLog) first(now time.Time) bool {
	if now.Sub(l.windowAt) >= l.period {
		l.windowAt, l.firsts = now, 0
	}
	if l.firsts >= firstBurst {
		return false
	}
	l.firsts++
	return true
}

// later starts the summary period at the first failure not written at once.
func (l *failureLog) later(now time.Time) {
	if l.summaryAt.IsZero() {
		l.summaryAt = now
	}
}

// logFailure records p's failure at now (its p.failures-th in a row; the
// next job may start at p.restartAt). REQUIRES: c.mu held.
func (c *Controller) logFailure(p *partition, now time.Time) {
	l := &c.flog
	if p.failures == 1 && l.first(now) {
		l.warnf("partition %s failed: %v\n(it restarts in %v, with a backoff doubling up to %v while it keeps failing; "+
			"repeated failures are summarized every %v; 'weir pipeline status' lists failing partitions)",
			p.spec.ID, p.lastErr, p.restartAt.Sub(now).Round(time.Millisecond), c.cfg.RestartBackoffMax, l.period)
		return
	}
	l.pending[p.spec.ID]++
	l.later(now)
}

// sourceListingFailed records a failed listing of name's source and, while
// it was never listed, schedules the retry. REQUIRES: c.mu held.
func (c *Controller) sourceListingFailed(name string, sl *sourceList, err error, now time.Time) {
	sl.failures++
	sl.lastErr, sl.lastErrAt = err, now
	what := "its partitions keep running; partitions added since are found once listing works again"
	if !sl.listed {
		d := c.backoff(sl.failures)
		sl.retryAt = now.Add(d)
		what = fmt.Sprintf("retrying in %v, with a backoff doubling up to %v; %s and the computations downstream cannot complete, and a drain cannot finish, until it is listed",
			d, c.cfg.RestartBackoffMax, name)
	}
	c.cfg.Logf("controller: list partitions of %s's source: %v", name, err)
	l := &c.flog
	if sl.failures == 1 && l.first(now) {
		l.warnf("cannot list the partitions of %s's source: %v\n(%s)", name, err, what)
		return
	}
	l.pendingSources[name]++
	l.later(now)
}

// flushFailures writes the summary of pending failures if one is due.
// REQUIRES: c.mu held.
func (c *Controller) flushFailures(now time.Time) {
	l := &c.flog
	if len(l.pending)+len(l.pendingSources) == 0 || now.Sub(l.summaryAt) < l.period {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "more failures since %s:", l.summaryAt.Format(time.TimeOnly))
	line := func(what string, n, failures int, retryAt time.Time, err error) {
		fmt.Fprintf(&b, "\n  %s: %d more, %d in a row", what, n, failures)
		if failures > 0 && now.Before(retryAt) {
			fmt.Fprintf(&b, ", next attempt in %v", retryAt.Sub(now).Round(time.Second))
		}
		if err != nil {
			fmt.Fprintf(&b, ": %s", firstLine(err.Error(), maxSummaryError))
		}
	}
	for _, name := range sortedKeys(l.pendingSources) {
		sl := c.sources[name]
		line("listing of "+name+"'s source", l.pendingSources[name], sl.failures, sl.retryAt, sl.lastErr)
	}
	ids := sortedKeys(l.pending)
	for i, id := range ids {
		if i == maxSummaryPartitions {
			fmt.Fprintf(&b, "\n  and %d more partition(s); see 'weir pipeline status'", len(ids)-i)
			break
		}
		if p := c.partitions[id]; p != nil {
			line("partition "+string(id), l.pending[id], p.failures, p.restartAt, p.lastErr)
		}
	}
	l.warnf("%s", b.String())
	clear(l.pending)
	clear(l.pendingSources)
	l.summaryAt = now
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// logRecovery says that p runs healthy again after its failures.
// REQUIRES: c.mu held.
func (c *Controller) logRecovery(p *partition) {
	delete(c.flog.pending, p.spec.ID)
	c.flog.warnf("partition %s runs healthy again after %d failure(s)", p.spec.ID, p.failures)
}

// firstLine returns s's first line, cut to at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
