package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// tableNoSpace fails every write of a table file with ENOSPC while full
// is set: a flush or compaction on a full disk.
type tableNoSpace struct{ full atomic.Bool }

func (f *tableNoSpace) String() string { return "tableNoSpace" }

func (f *tableNoSpace) MaybeError(op errorfs.Op) error {
	if f.full.Load() && strings.HasSuffix(op.Path, ".sst") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpCreate) {
		return fmt.Errorf("write %s: %w", op.Path, syscall.ENOSPC)
	}
	return nil
}

// TestOpenOnFullDiskFails: Pebble's Open waits for the flush of the
// recovered log, which on a full disk fails and is retried forever. Open
// returns a *NoSpaceError (store.ErrUnusable, not store.ErrCorrupt) within
// seconds instead; once space is back, the directory opens again with
// every commit.
func TestOpenOnFullDiskFails(t *testing.T) {
	mem := vfs.NewMem()
	inj := &tableNoSpace{}
	fs := wrapFS(mem, inj)
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte("k"), []byte("v"))
	if err := s.Commit(context.Background(), txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	inj.full.Store(true)
	start := time.Now()
	_, err = Open("db", Options{FS: fs})
	var ns *NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, store.ErrUnusable) || errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open on a full disk: %v, want a *NoSpaceError", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open took %v", d)
	}
	if !strings.Contains(err.Error(), "no space left on the device of db") || !strings.Contains(err.Error(), "needed") {
		t.Fatalf("the error names neither the directory nor the space needed: %v", err)
	}
	// The abandoned open still holds the directory: refused the same way.
	if _, err := Open("db", Options{FS: fs}); !errors.As(err, &ns) {
		t.Fatalf("a second Open while the first waits: %v", err)
	}

	inj.full.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err = Open("db", Options{FS: fs})
		if err == nil {
			break
		}
		if !errors.As(err, &ns) || time.Now().After(deadline) {
			t.Fatalf("Open once space is back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer s.Close()
	if v, ok, err := s.Get(context.Background(), store.FlowState, []byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("after the reopen: %q %v %v", v, ok, err)
	}
}

// TestFlushOnFullDiskBreaksStore: a background flush that fails for lack
// of space breaks the Store with a *NoSpaceError, quietly (no log line per
// retry) and without damage.
func TestFlushOnFullDiskBreaksStore(t *testing.T) {
	mem := vfs.NewMem()
	inj := &tableNoSpace{}
	var logged atomic.Int64
	s, err := Open("db", Options{FS: wrapFS(mem, inj), Logger: slog.New(countingHandler{&logged}), MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	inj.full.Store(true)
	ctx := context.Background()
	var cerr error
	for i := 0; i < 2000 && cerr == nil; i++ {
		txn := store.NewTxn()
		txn.Put(store.FlowState, fmt.Appendf(nil, "k%05d", i), make([]byte, 4<<10))
		cerr = s.Commit(ctx, txn)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cerr == nil {
		_, _, cerr = s.Get(ctx, store.FlowState, []byte("k00000"))
		if time.Now().After(deadline) {
			t.Fatal("the store did not break on a failing flush")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ns *NoSpaceError
	if !errors.As(cerr, &ns) || errors.Is(cerr, store.ErrCorrupt) {
		t.Fatalf("after a flush failed for space: %v, want a *NoSpaceError", cerr)
	}
	time.Sleep(2 * noSpaceRetryPause)
	if n := logged.Load(); n > 0 {
		t.Fatalf("%d log lines for a full disk, want none (the caller reports the error)", n)
	}
	inj.full.Store(false)
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrUnusable) {
		t.Logf("close: %v", err)
	}
}

// TestManifestNoSpaceExitsClearly: Pebble's Fatalf for a MANIFEST write
// that failed for lack of space, on a background goroutine nothing
// recovers, ends the process with one line saying what to do (not a stack
// trace); the Fatalf of a failed commit, which Store.apply recovers, does
// not.
func TestManifestNoSpaceExitsClearly(t *testing.T) {
	var exits []int
	exitProcess = func(code int) { exits = append(exits, code) }
	defer func() { exitProcess = os.Exit }()
	var logged atomic.Int64
	var lines strings.Builder
	s := openMem(t, vfs.NewMem(), clock.Real{})
	defer s.Close()
	s.log = slog.New(slog.NewTextHandler(&lines, nil))
	l := &pebbleLogger{log: slog.New(countingHandler{&logged}), onFatal: s.markBroken, exitNoSpace: s.exitNoSpace}
	fatal := func(format string, args ...any) (recovered bool) {
		defer func() { _, recovered = recover().(fatalPanic) }()
		l.Fatalf(format, args...)
		return false
	}
	enospc := &os.PathError{Op: "sync", Path: "db/MANIFEST-000001", Err: syscall.ENOSPC}
	if !fatal(commitFatal, enospc) || len(exits) != 0 {
		t.Fatalf("a failed commit's Fatalf: exits %v, want the fatalPanic for Store.apply", exits)
	}
	if !fatal("MANIFEST sync failed: %v", enospc) || len(exits) != 1 || exits[0] != 1 {
		t.Fatalf("a MANIFEST write without space: exits %v, want one exit(1)", exits)
	}
	if out := lines.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "no space left on the device of db") || !strings.Contains(out, "run the same command again") {
		t.Fatalf("the exit is not said in one clear line:\n%s", out)
	}
	if logged.Load() != 0 {
		t.Fatalf("Fatalf logged %d records for a full disk, want none besides the exit line", logged.Load())
	}
}

// TestCommitFatalIsPebbles: the Fatalf format the logger treats as a
// recoverable commit failure (commitFatal) must be the one Pebble's
// DB.Apply uses; if an upgrade rewords it, a full disk during a commit
// would end the process. Read from the Pebble source this build uses.
func TestCommitFatalIsPebbles(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cockroachdb/pebble/v2").Output()
	if err != nil {
		t.Fatalf("locate the Pebble module: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "db.go"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Fatalf(" + strconv.Quote(commitFatal) + ", err)"; !strings.Contains(string(src), want) {
		t.Fatalf("Pebble's db.go has no %s: its commit Fatalf changed; update commitFatal", want)
	}
}

// smallDisk reports avail bytes free, whatever the filesystem holds.
type smallDisk struct {
	vfs.FS
	avail *atomic.Uint64
}

func (d smallDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	a := d.avail.Load()
	return vfs.DiskUsage{AvailBytes: a, TotalBytes: 1 << 40, UsedBytes: 1<<40 - a}, nil
}

// TestLargeCommitRefusedWithoutRoom: a commit large enough for Pebble's
// large-batch path (which rotates the log first, and panics when that
// meets a full disk) is refused before Pebble sees it when the disk has
// no room for it: a *NoSpaceError, not ambiguous, nothing written, the
// Store still usable; with room it commits.
func TestLargeCommitRefusedWithoutRoom(t *testing.T) {
	ctx := context.Background()
	var avail atomic.Uint64
	avail.Store(600 << 10)
	s, err := Open("db", Options{FS: smallDisk{FS: vfs.NewMem(), avail: &avail}, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := func() *store.Txn {
		txn := store.NewTxn()
		for i := range 400 {
			txn.Put(store.FlowState, fmt.Appendf(nil, "big-%04d", i), make([]byte, 1024))
		}
		return txn
	}
	err = s.Commit(ctx, big())
	var ns *NoSpaceError
	if !errors.As(err, &ns) || errors.Is(err, store.ErrAmbiguous) {
		t.Fatalf("a 400 KiB commit with 600 KiB free: %v, want a *NoSpaceError that is not ambiguous", err)
	}
	if ns.Need <= 400<<10 || !strings.Contains(err.Error(), "a commit of") {
		t.Fatalf("the error does not say what the commit needs: %v", err)
	}
	small := store.NewTxn()
	small.Put(store.FlowState, []byte("k"), []byte("v"))
	if err := s.Commit(ctx, small); err != nil {
		t.Fatalf("a small commit after the refusal: %v", err)
	}
	if _, ok, err := s.Get(ctx, store.FlowState, []byte("big-0000")); err != nil || ok {
		t.Fatalf("the refused commit's row: present %v, err %v", ok, err)
	}
	avail.Store(1 << 30)
	if err := s.Commit(ctx, big()); err != nil {
		t.Fatalf("the large commit with room: %v", err)
	}
}
