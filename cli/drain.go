package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir/controller"
)

// exitDrainTimeout is weir run's exit code when a drain did not finish
// within --drain-timeout and the pipeline was stopped hard (paused).
const exitDrainTimeout = 3

// defaultDrainTimeout leaves time to stop hard within the 30 s a service
// manager usually waits between SIGTERM and SIGKILL (a SIGKILL is safe too).
const defaultDrainTimeout = 20 * time.Second

// haltGrace bounds the hard stop itself: removed jobs get the controller's
// lost-job timeout to exit (3 s by default); after haltGrace the run is
// cancelled (as a second signal does).
const haltGrace = 15 * time.Second

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// signalHandler turns SIGTERM/SIGINT into a drain of the runner's pipeline
// (target stopped). If the drain has not finished after drainTimeout (0:
// no limit) it stops the pipeline hard (controller.Halt: a pause, nothing
// lost) and records it; a second signal cancels the run at once. It
// returns when ctx ends.
type signalHandler struct {
	r            *runner
	logf         func(format string, args ...any)
	drainTimeout time.Duration
	cancel       context.CancelFunc
	halted       atomic.Bool
}

func (h *signalHandler) run(ctx context.Context, sigs <-chan os.Signal) {
	select {
	case <-ctx.Done():
		return
	case <-sigs:
	}
	ctl := h.r.eng.Controller()
	var timeout <-chan time.Time
	if h.drainTimeout > 0 {
		t := time.NewTimer(h.drainTimeout)
		defer t.Stop()
		timeout = t.C
		h.logf("signal received: draining for up to %v (--drain-timeout), then stopping hard; send it again to stop at once", h.drainTimeout)
	} else {
		h.logf("signal received: draining without a time limit (--drain-timeout 0); send it again to stop at once")
	}
	if err := ctl.SetTarget(controller.Stopped); err != nil {
		h.logf("%v", err)
	}
	select {
	case <-ctx.Done():
		return
	case <-sigs:
		h.logf("second signal: stopping now")
		h.cancel()
		return
	case <-timeout:
	}
	h.halted.Store(true)
	why := ""
	if note := failingNote(h.r.eng.Status()); note != "" {
		why = "; " + strings.TrimSpace(note)
	}
	h.logf("the drain did not finish within %v%s\nstopping hard: every job stops now and the pipeline is paused; what is in flight stays in the store (nothing is lost, except what at-most-once sinks still queue: the summary counts it), and the next 'weir run' resumes it exactly once",
		h.drainTimeout, why)
	ctl.Halt()
	grace := time.NewTimer(haltGrace)
	defer grace.Stop()
	select {
	case <-ctx.Done():
	case <-sigs:
		h.logf("second signal: stopping now")
		h.cancel()
	case <-grace.C:
		h.logf("the hard stop did not finish within %v: stopping now", haltGrace)
		h.cancel()
	}
}

// drainTimedOut is the error of a run stopped hard after a drain timeout.
func (h *signalHandler) drainTimedOut(state controller.State) error {
	return &exitError{code: exitDrainTimeout, err: fmt.Errorf(
		"the drain did not finish within %v; stopped hard (pipeline %s, nothing lost): rerun 'weir run' to resume, or raise --drain-timeout",
		h.drainTimeout, state)}
}
