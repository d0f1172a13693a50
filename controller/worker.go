package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/runtime"
)

// Worker runs jobs. In the embedded engine a worker is a group of
// goroutines in the controller's process; it heartbeats so that the
// controller can tell when it is lost. Each life of a worker has its own
// incarnation: jobs started in an earlier incarnation are never trusted
// again.
type Worker struct {
	id    string
	clock clock.Clock

	mu          sync.Mutex
	incarnation int
	lastBeat    time.Time
	frozen      bool
	jobs        map[*JobHandle]struct{}
}

// NewWorker returns a live worker whose heartbeats are read from clk (the
// store's clock).
func NewWorker(id string, clk clock.Clock) *Worker {
	return &Worker{id: id, clock: clk, lastBeat: clk.Now(), jobs: map[*JobHandle]struct{}{}}
}

// ID returns the worker's name.
func (w *Worker) ID() string { return w.id }

// Incarnation returns the worker's current incarnation.
func (w *Worker) Incarnation() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.incarnation
}

// Heartbeat records that the worker is alive now. A frozen worker's
// heartbeats are dropped.
func (w *Worker) Heartbeat() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.frozen {
		w.lastBeat = w.clock.Now()
	}
}

// Freeze makes the worker stop heartbeating (a network partition, a stalled
// process) without stopping its jobs: they become zombies once the
// controller declares the worker lost and aborts their leases.
func (w *Worker) Freeze() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
}

// Restart models a worker process restart: every job of the old incarnation
// is stopped, and the worker heartbeats again as a new incarnation.
func (w *Worker) Restart() {
	w.mu.Lock()
	jobs := w.jobs
	w.jobs = map[*JobHandle]struct{}{}
	w.incarnation++
	w.frozen = false
	w.lastBeat = w.clock.Now()
	w.mu.Unlock()
	for h := range jobs {
		h.Stop()
	}
}

// Shutdown stops every job of the worker and waits for them to exit (up to
// 5 seconds: a job stuck in a broken store is abandoned).
func (w *Worker) Shutdown() {
	w.mu.Lock()
	jobs := w.jobs
	w.jobs = map[*JobHandle]struct{}{}
	w.incarnation++
	w.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for h := range jobs {
		h.Stop()
	}
	for h := range jobs {
		select {
		case <-h.done:
		case <-deadline:
			return
		}
	}
}

// RunHeartbeats heartbeats every period until ctx ends.
func (w *Worker) RunHeartbeats(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		w.Heartbeat()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Worker) aliveAt(now time.Time, timeout time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return now.Sub(w.lastBeat) < timeout
}

func (w *Worker) load() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

// start runs a job on its own goroutine.
func (w *Worker) start(cfg runtime.Config) (*JobHandle, error) {
	job, err := runtime.NewJob(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &JobHandle{cancel: cancel, done: make(chan struct{}), job: job}
	w.mu.Lock()
	w.jobs[h] = struct{}{}
	w.mu.Unlock()
	go func() {
		err := job.Run(ctx)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil
		}
		h.finish(err)
		w.mu.Lock()
		delete(w.jobs, h)
		w.mu.Unlock()
	}()
	return h, nil
}

// JobHandle is a running job.
type JobHandle struct {
	cancel context.CancelFunc
	job    *runtime.Job

	mu   sync.Mutex
	done chan struct{}
	err  error
	fin  bool
}

func (h *JobHandle) finish(err error) {
	h.mu.Lock()
	h.err, h.fin = err, true
	h.mu.Unlock()
	close(h.done)
}

// Stop asks the job to stop; it does not wait.
func (h *JobHandle) Stop() { h.cancel() }

// Done reports whether the job has exited, and its error.
func (h *JobHandle) Done() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fin, h.err
}

// Wait blocks until the job has exited.
func (h *JobHandle) Wait() { <-h.done }
