package pebble

// The store conformance suite (store/storetest) on this backend, on a real
// directory (fsyncs included) and on Pebble's in-memory filesystem.

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

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
	fs   func() vfs.FS
	mu   sync.Mutex
	opts map[store.Store]Options
	dirs map[store.Store]string
}

func newHarness(fs func() vfs.FS) *harness {
	return &harness{fs: fs, opts: map[store.Store]Options{}, dirs: map[store.Store]string{}}
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
	h.mu.Unlock()
	return s
}

func (h *harness) Harness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, clk *clock.Manual) store.Store {
			opts := Options{Clock: clk, Logger: quietLogger, MemTableSize: 1 << 20}
			dir := "db"
			if h.fs == nil {
				dir = t.TempDir()
			} else {
				opts.FS = h.fs()
			}
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
	}
}

func TestConformanceDisk(t *testing.T) {
	storetest.Run(t, newHarness(nil).Harness())
}

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, newHarness(func() vfs.FS { return vfs.NewMem() }).Harness())
}
