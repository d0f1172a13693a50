package cli

import (
	"context"
	"fmt"
	"sync"
)

// fatalStop stops a run when a connector reports that it stopped for good
// (Options.fatal): retrying its job would fail the same way forever, so
// 'weir run' cancels the run (a hard stop, safe like a SIGKILL) and exits
// with the connector's error, which says what to do.
type fatalStop struct {
	mu  sync.Mutex
	err error
}

// watch waits for a fatal error until ctx ends; on one it records it and
// calls stop.
func (f *fatalStop) watch(ctx context.Context, fatal <-chan error, stop func()) {
	if fatal == nil {
		return
	}
	select {
	case <-ctx.Done():
	case err := <-fatal:
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		stop()
	}
}

// result returns the run's error: the fatal one, explained, if there was
// one, else err.
func (f *fatalStop) result(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return err
	}
	return fmt.Errorf("the pipeline was stopped: %w\n\nRestarting would fail the same way: do what the message says, then run the same 'weir run' again", f.err)
}
