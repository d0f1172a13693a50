package pebble

// A full disk. What Pebble (v2.1) does when a write meets ENOSPC, and what
// the Store makes of it:
//
//   - A MANIFEST write that fails (after a flush or compaction wrote its
//     table) is fatal in Pebble (Logger.Fatalf on a background goroutine):
//     the process exits with one line saying so and what to do
//     (exitNoSpace); the next open replays the log.
//
//   - A flush or compaction that cannot write its table reports a
//     background error and is retried at once, without end and without
//     backoff (Pebble's own TODO); Pebble's Open waits for the flush of the
//     recovered write-ahead log, so on a full disk it never returns. The
//     Store breaks with a *NoSpaceError on the first such error, logs
//     nothing for it (the caller reports the returned error once), and
//     slows the retries to one per noSpaceRetryPause. Open gives up with a
//     *NoSpaceError as soon as the flush fails; Pebble's Open goes on in
//     the background and, once space is freed, completes and is closed
//     again, releasing the directory (pendingOpens).
//   - A commit whose write-ahead-log write or sync fails: DB.Apply calls
//     Logger.Fatalf for a failure before the batch was applied and for one
//     after it (applied to the memtable, its log record maybe complete,
//     maybe torn), with the same message, so the Store cannot tell them
//     apart. The commit fails with a *store.AmbiguousError wrapping the
//     *NoSpaceError, and the Store is broken: a reopen replays only what
//     reached the log, and reads on the reopened store resolve the commit
//     (wholly present or wholly absent). It is not damage: every
//     acknowledged commit is in the log.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/store"
)

// NoSpaceError says the filesystem under a store is full (ENOSPC, or
// EDQUOT: a disk quota reached). It matches store.ErrUnusable, not
// store.ErrCorrupt: the Store that met it is broken and must be closed and
// opened again once Free has grown to Need; nothing acknowledged is lost.
type NoSpaceError struct {
	// Dir is the store's directory.
	Dir string
	// Free is the space available there when the error was seen, in bytes.
	Free uint64
	// Need is the least free space the store needs to open again: a new
	// log, a MANIFEST edit and the first commits (noSpaceMargin). The
	// flush of its write-ahead log at the open needs about the log's
	// compressed size more; if that is not there, Open fails again with a
	// *NoSpaceError and can be retried.
	Need uint64
	// Err is the failure Pebble reported.
	Err error
}

func (e *NoSpaceError) Error() string {
	cause := e.Err
	var pe *os.PathError
	if errors.As(cause, &pe) {
		cause = pe // "write DIR/000055.log: no space left on device", without Pebble's prefixes
	}
	return fmt.Sprintf("no space left on the device of %s: %s free, at least %s needed (%s)",
		e.Dir, ByteSize(e.Free), ByteSize(e.Need), firstLine(cause))
}

// Is makes errors.Is(err, store.ErrUnusable) true.
func (e *NoSpaceError) Is(target error) bool { return target == store.ErrUnusable }

// Unwrap returns Pebble's error.
func (e *NoSpaceError) Unwrap() error { return e.Err }

// noSpaceMargin is NoSpaceError.Need.
const noSpaceMargin = 512 << 10

// noSpaceRetryPause slows Pebble's endless retries of a flush or
// compaction that failed for lack of space (each retry is otherwise
// immediate: 88 MB of log in 9 minutes).
const noSpaceRetryPause = time.Second

// isNoSpace reports whether err is a full filesystem or quota.
func isNoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(err.Error(), syscall.ENOSPC.Error()))
}

// Space returns the bytes free on the filesystem of the store in dir and
// the bytes it needs free to open (NoSpaceError.Need).
func Space(dir string) (free, need uint64, err error) {
	return space(vfs.Default, dir)
}

func space(fs vfs.FS, dir string) (free, need uint64, err error) {
	du, err := fs.GetDiskUsage(dir)
	if err != nil {
		return 0, 0, err
	}
	return du.AvailBytes, noSpaceMargin, nil
}

// noSpaceError wraps cause as a *NoSpaceError of dir (cause itself if it
// is one already).
func noSpaceError(fs vfs.FS, dir string, cause error) *NoSpaceError {
	var ns *NoSpaceError
	if errors.As(cause, &ns) {
		return ns
	}
	free, need, _ := space(fs, dir)
	return &NoSpaceError{Dir: dir, Free: free, Need: need, Err: cause}
}

// checkSpace fails with a *NoSpaceError when dir (an existing store) has
// less free space than it needs to open: Pebble's Open would wait forever
// for the flush of the recovered log.
func checkSpace(fs vfs.FS, dir string) error {
	return lacksRoom(fs, dir, 0, syscall.ENOSPC) // a new directory, or no figures: Open finds out
}

// lacksRoom returns a *NoSpaceError with cause when dir has less free
// space than its margin (space) plus extra bytes, and nil when it has
// enough or the figures cannot be read.
func lacksRoom(fs vfs.FS, dir string, extra uint64, cause error) error {
	free, need, err := space(fs, dir)
	if err != nil || free >= need+extra {
		return nil
	}
	return &NoSpaceError{Dir: dir, Free: free, Need: need + extra, Err: cause}
}

// roomForBatch refuses, with a *NoSpaceError and before Pebble sees it, a
// large batch (Store.largeBatch) that the disk has no room for. Pebble
// takes a batch of about half a memtable or more as a flushable of its own
// and rotates the write-ahead log before writing it; when that rotation
// meets a full disk, Pebble v2.1 panics ("sync: unlock of unlocked mutex",
// a fatal error no recover catches), so the clean error of a failed log
// write never comes. A refused batch was not written: the error is not
// ambiguous and the Store stays usable. Smaller batches go to the log of
// the active memtable, whose failures Pebble reports (package comment).
func (s *Store) roomForBatch(size uint64) error {
	if size < s.largeBatch {
		return nil
	}
	return lacksRoom(s.fs, s.dir, size, fmt.Errorf("a commit of %s: %w", ByteSize(size), syscall.ENOSPC))
}

// exitProcess ends the process; tests replace it.
var exitProcess = os.Exit

// exitNoSpace ends the process, with one clear line, after Pebble failed
// a background write of its MANIFEST for lack of space: Pebble's state is
// no longer trustworthy and only a reopen recovers it (which replays the
// log: nothing acknowledged is lost). Pebble's default logger exits the
// same way, without saying what to do.
func (s *Store) exitNoSpace(err error) {
	s.log.LogAttrs(context.Background(), slog.LevelError, fmt.Sprintf(
		"pebble store: %v; Pebble cannot go on after a failed MANIFEST write, so the process exits. "+
			"Nothing acknowledged is lost: free space, then run the same command again", noSpaceError(s.fs, s.dir, err)))
	exitProcess(1)
}

// pendingOpens holds, by directory, the Pebble opens that Open gave up on
// for lack of space; each channel is closed when its open has finished and
// the database is closed again. An Open of the same directory meanwhile
// fails with a *NoSpaceError (the directory is still locked by it).
var pendingOpens sync.Map // string → chan struct{}

// pendingOpen returns a *NoSpaceError if an abandoned open of dir is still
// waiting for space.
func pendingOpen(fs vfs.FS, dir string) error {
	v, ok := pendingOpens.Load(openKey(dir))
	if !ok {
		return nil
	}
	select {
	case <-v.(chan struct{}):
		return nil
	default:
		return noSpaceError(fs, dir, fmt.Errorf("an earlier open of %s is still waiting for space: %w", dir, syscall.ENOSPC))
	}
}

func openKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// ByteSize formats n bytes for a person: "512 B", "3.1 MiB".
func ByteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
