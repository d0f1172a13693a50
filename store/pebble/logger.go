package pebble

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// pebbleLogger is the pebbledb.Logger of a Store.
//
//   - Infof is dropped: Pebble reports routine events through it ("Found 0
//     WALs", flushes, compactions), which is noise for an embedded store.
//   - Errorf goes to the Store's slog.Logger at Error level. Pebble uses it for
//     background failures it retries (a failed flush or compaction); errors of
//     calls still reach the caller as returned errors. A background failure
//     for lack of space is not logged but breaks the Store (nospace.go).
//   - Fatalf marks the Store broken and panics with a fatalPanic. Pebble calls
//     Fatalf when it cannot go on safely, and its default logger exits the
//     process, so Fatalf must never return: in particular DB.Apply calls it
//     when a batch commit failed and, if it returned, would report the failed
//     commit as a success. Store.apply recovers the fatalPanic of its own
//     commit and reports an AmbiguousError; a Fatalf in one of Pebble's
//     background goroutines (e.g. a failed MANIFEST sync) is not recovered and
//     ends the process, as it would with Pebble's default logger, because
//     Pebble's state is no longer trustworthy and only a reopen recovers it.
//     When that failure is a full disk, Fatalf ends the process itself with
//     one line saying what to do (Store.exitNoSpace) instead of a stack trace.
type pebbleLogger struct {
	log       *slog.Logger
	onFatal   func(error)
	onCorrupt func(pebbledb.DataCorruptionInfo)
	// onNoSpace gets a background error that is a full disk (nospace.go);
	// nil: such errors are logged like any other.
	onNoSpace func(error)
	// exitNoSpace, if set, ends the process for a Fatalf that is a full
	// disk outside a commit (see Fatalf).
	exitNoSpace func(error)
}

// commitFatal is the format of DB.Apply's Fatalf, the one Store.apply
// recovers.
const commitFatal = "pebble: fatal commit error: %v"

var _ pebbledb.Logger = (*pebbleLogger)(nil)

func (l *pebbleLogger) Infof(string, ...any) {}

func (l *pebbleLogger) Errorf(format string, args ...any) {
	l.log.LogAttrs(context.Background(), slog.LevelError, "pebble: "+fmt.Sprintf(format, args...))
}

func (l *pebbleLogger) Fatalf(format string, args ...any) {
	err := fatalError(format, args...)
	noSpace := isNoSpace(err)
	if !noSpace { // a full disk: the caller reports the returned error once
		l.log.LogAttrs(context.Background(), slog.LevelError, err.Error())
	}
	l.onFatal(err)
	if noSpace && format != commitFatal && l.exitNoSpace != nil {
		// A background write (the MANIFEST edit of a flush or compaction)
		// failed for lack of space. Nothing recovers the panic below on
		// that goroutine: the process would end with a stack trace.
		l.exitNoSpace(err)
	}
	panic(fatalPanic{err: err})
}

// fatalPanic is the value Fatalf panics with; Store.apply recovers only this type.
type fatalPanic struct{ err error }

// fatalError formats a Fatalf message, keeping the first error argument as the
// cause (%w) so that errors.Is still sees what Pebble failed on.
func fatalError(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for _, a := range args {
		if cause, ok := a.(error); ok {
			return fmt.Errorf("pebble: %s: %w", msg, cause)
		}
	}
	return fmt.Errorf("pebble: %s", msg)
}

// eventListener routes Pebble's event callbacks that default to the logger:
// a background error is logged; a detected data corruption breaks the Store
// (onCorrupt, which logs it once, without Pebble's stack traces) rather than
// being fatal, because the read or compaction that found it also returns an
// error to its caller.
func eventListener(l *pebbleLogger) *pebbledb.EventListener {
	return &pebbledb.EventListener{
		BackgroundError: func(err error) {
			if l.onNoSpace != nil && isNoSpace(err) {
				// Not logged: the Store breaks and its callers report the
				// *NoSpaceError. Pebble retries the flush or compaction at
				// once and forever; this callback runs on that goroutine, so
				// pausing here slows the retries.
				l.onNoSpace(err)
				time.Sleep(noSpaceRetryPause)
				return
			}
			l.Errorf("background error: %v", err)
		},
		DataCorruption: func(info pebbledb.DataCorruptionInfo) {
			l.onCorrupt(info)
		},
	}
}
