package pebble

// The store conformance suite (store/storetest) on this backend, on a real
// directory (fsyncs included) and on Pebble's in-memory filesystem.

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/storetest"
)

// quietLogger discards everything; tests that expect Pebble errors check
// them through returned errors.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness opens stores in fresh directories of fs (a new temp dir per store
// when fs is nil) and remembers where each lives so Reopen can find it.
type harness struct {
	fs    func() vfs.FS
	mu    sync.Mutex
	opts  map[store.Store]Options
	dirs  map[store.Store]string
	holds map[store.Store]*walHold
}

func newHarness(fs func() vfs.FS) *harness {
	return &harness{fs: fs, opts: map[store.Store]Options{}, dirs: map[store.Store]string{}, holds: map[store.Store]*walHold{}}
}

func (h *harness) open(t *testing.T, dir string, opts Options) store.Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	h.mu.Lock()
	h.opts[s], h.dirs[s] = opts, dir
	h.holds[s] = opts.FS.(reuseWrappingFS).inj.(*walHold)
	h.mu.Unlock()
	return s
}

func (h *harness) Harness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, clk *clock.Manual) store.Store {
			opts := Options{Clock: clk, Logger: quietLogger, MemTableSize: 1 << 20}
			dir, fs := "db", vfs.Default
			if h.fs == nil {
				dir = t.TempDir()
			} else {
				fs = h.fs()
			}
			opts.FS = wrapFS(fs, &walHold{})
			return h.open(t, dir, opts)
		},
		Reopen: func(t *testing.T, s store.Store, clk *clock.Manual) store.Store {
			h.mu.Lock()
			opts, dir := h.opts[s], h.dirs[s]
			h.mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatalf("Close before reopen: %v", err)
			}
			opts.Clock = clk
			return h.open(t, dir, opts)
		},
		Hold: func(t *testing.T, s store.Store, txn *store.Txn) func() error {
			h.mu.Lock()
			w := h.holds[s]
			h.mu.Unlock()
			return w.hold(t, s, txn)
		},
	}
}

// walHold blocks the WAL syncs of a store while armed: a commit then waits
// in Pebble's commit pipeline, its batch written to the log but not
// visible, as a commit in flight.
type walHold struct {
	mu      sync.Mutex
	armed   bool
	blocked chan struct{} // closed once a sync is blocked
	release chan struct{}
}

func (w *walHold) String() string { return "walHold" }

func (w *walHold) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	w.mu.Lock()
	if !w.armed {
		w.mu.Unlock()
		return nil
	}
	select {
	case <-w.blocked:
	default:
		close(w.blocked)
	}
	release := w.release
	w.mu.Unlock()
	<-release
	return nil
}

// hold commits txn to s and returns once its WAL sync is blocked; finish
// lets the sync (and every later one) through and returns the commit's
// error.
func (w *walHold) hold(t *testing.T, s store.Store, txn *store.Txn) (finish func() error) {
	t.Helper()
	w.mu.Lock()
	w.armed, w.blocked, w.release = true, make(chan struct{}), make(chan struct{})
	blocked, release := w.blocked, w.release
	w.mu.Unlock()
	let := func() {
		w.mu.Lock()
		w.armed = false
		w.mu.Unlock()
		close(release)
	}
	done := make(chan error, 1)
	go func() { done <- s.Commit(t.Context(), txn) }()
	select {
	case <-blocked:
	case err := <-done:
		let()
		t.Fatalf("the held commit returned (%v) before its WAL sync", err)
	case <-time.After(30 * time.Second):
		let()
		t.Fatal("the held commit never reached its WAL sync")
	}
	return func() error {
		let()
		return <-done
	}
}

func TestConformanceDisk(t *testing.T) {
	storetest.Run(t, newHarness(nil).Harness())
}

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, newHarness(func() vfs.FS { return vfs.NewMem() }).Harness())
}
