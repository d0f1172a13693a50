package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/weir-stream/weir/connector/queue"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// A full disk under 'weir run': the store breaks with a
// *pstore.NoSpaceError (nothing acknowledged is lost, nothing is damaged),
// the pipeline stops, the store is closed, and the run waits, paused, for
// the space the store needs; it then opens the store again and resumes
// from what was committed (each row exactly once, as after any restart).
// The log says it once, then a summary at most every spaceSummaryPeriod; a
// SIGTERM or SIGINT while paused ends the run at once (exit 0: there is
// nothing to drain).

// spaceSummaryPeriod bounds how often a paused run repeats itself.
const spaceSummaryPeriod = 10 * time.Second

// spacePoll is how often a paused run looks at the free space.
const spacePoll = 250 * time.Millisecond

// spaceWait is a run paused for disk space.
type spaceWait struct {
	logf  func(format string, args ...any)
	dir   string // the store's directory
	since time.Time
	last  time.Time // of the last line logged
}

// pauseForSpace says, once, that the run is paused and what to do.
func pauseForSpace(logf func(string, ...any), ns *pstore.NoSpaceError) *spaceWait {
	w := &spaceWait{logf: logf, dir: ns.Dir, since: time.Now(), last: time.Now()}
	logf("PAUSED: %v\n"+
		"  The pipeline is paused; nothing is lost and nothing is damaged. Free at least %s on the device of %s\n"+
		"  (delete files there, or grow the volume): the run resumes by itself, each row exactly once.\n"+
		"  SIGTERM or SIGINT stops it; the same 'weir run' command resumes it later.",
		ns, pstore.ByteSize(ns.Need), ns.Dir)
	return w
}

// wait returns true once the store's device has the space it needs, or
// false when a signal came (the run then ends).
func (w *spaceWait) wait(sigs <-chan os.Signal) bool {
	poll := time.NewTicker(spacePoll)
	defer poll.Stop()
	for {
		select {
		case <-sigs:
			w.logf("signal received while paused for disk space: stopping (nothing to drain; run the same command again once there is space)")
			return false
		case <-poll.C:
		}
		free, need, err := pstore.Space(w.dir)
		if err == nil && free >= need {
			return true
		}
		if time.Since(w.last) >= spaceSummaryPeriod {
			w.last = time.Now()
			w.logf("still PAUSED for %s: %s free on the device of %s, at least %s needed",
				time.Since(w.since).Round(time.Second), pstore.ByteSize(free), w.dir, pstore.ByteSize(need))
		}
	}
}

// resumed says the store is open again.
func (w *spaceWait) resumed() {
	free, _, _ := pstore.Space(w.dir)
	w.logf("space is back (%s free on the device of %s) after %s paused: resuming", pstore.ByteSize(free), w.dir, time.Since(w.since).Round(time.Second))
}

// writeResolved says exactly what a 'weir queue write' whose commit
// outcome is unknown wrote (a full disk or an I/O error under its commit,
// which breaks the store): the store, closed by then, is opened again
// read-only (which needs no space), and the queue's partitions are
// compared with their lengths before the write. It returns how many rows
// were written, or the error to report. Other outcomes (n, err) come
// back unchanged.
func writeResolved(o *Options, dir string, n int, err error) (int, error) {
	var uw *queue.UnresolvedWriteError
	if !errors.As(err, &uw) {
		return n, err
	}
	failure := uw.Err.Error()
	var ns *pstore.NoSpaceError
	if errors.As(uw.Err, &ns) {
		failure = ns.Error()
	}
	st, err := openStoreMode(dir, true)
	if err != nil {
		return 0, fmt.Errorf("the write of %d rows to queue %s failed: %s\n"+
			"Whether they were written is unknown: the store could not be opened again to look (%v).\n"+
			"Check with 'weir queue read --data %s %s' before writing them again", uw.Rows, uw.Queue, failure, err, dir, uw.Queue)
	}
	defer st.Close()
	written, err := uw.Resolve(context.Background(), st)
	switch {
	case err != nil:
		return 0, fmt.Errorf("the write of %d rows to queue %s failed: %s\n"+
			"Whether they were written is unknown (%v).\n"+
			"Check with 'weir queue read --data %s %s' before writing them again", uw.Rows, uw.Queue, failure, err, dir, uw.Queue)
	case written:
		fmt.Fprintf(o.Stderr, "weir queue: the commit failed as it ended (%s), but reading the store again shows that all %d rows were written: do not write them again\n", failure, uw.Rows)
		return uw.Rows, nil
	}
	again := "once the cause is fixed"
	if ns != nil {
		again = fmt.Sprintf("once at least %s is free on the device of %s", pstore.ByteSize(ns.Need), ns.Dir)
	}
	return 0, fmt.Errorf("the write of %d rows to queue %s failed: %s\n"+
		"Nothing was written: reading the store again shows the queue as it was before. Write the rows again %s", uw.Rows, uw.Queue, failure, again)
}
