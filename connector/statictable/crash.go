package statictable

// The named points of the sink's publish sequence, in order. A build with
// the weir_crashpoints tag can kill the process at any of them (see
// crashpoints.go); tests use them to check that a crash at any point
// leaves the table and its progress both published or neither.
const (
	// CrashTempPartial: part of the table's temporary file is written.
	CrashTempPartial = "temp-partial"
	// CrashTempComplete: the temporary file is complete and synced, not
	// yet renamed into place.
	CrashTempComplete = "temp-complete"
	// CrashTablePublished: the table file has its final name; the manifest
	// does not list it yet.
	CrashTablePublished = "table-published"
	// CrashProgressPublished: the manifest lists the table and the new
	// frontier; the epoch commit that records it has not happened.
	CrashProgressPublished = "progress-published"
)

// CrashEnv names the environment variable read by a weir_crashpoints
// build: "POINT:N" kills the process with SIGKILL the N-th time (from 1)
// any sink instance reaches POINT. Only test binaries are built with the
// tag; other builds ignore it.
const CrashEnv = "WEIR_STATICTABLE_CRASH"

// CrashPoints lists the crash points in publish order.
var CrashPoints = []string{CrashTempPartial, CrashTempComplete, CrashTablePublished, CrashProgressPublished}

// crashAt is called at each crash point. It does nothing unless a
// weir_crashpoints build or a test replaces it.
var crashAt = func(point string) {}

// crashWriter writes the first buffer in two halves with the
// CrashTempPartial point between them, so a crash there leaves a
// temporary file that is certainly incomplete.
type crashWriter struct {
	TempFile
	hit bool
}

func (w *crashWriter) Write(b []byte) (int, error) {
	if w.hit || len(b) < 2 {
		return w.TempFile.Write(b)
	}
	w.hit = true
	n, err := w.TempFile.Write(b[:len(b)/2])
	if err != nil {
		return n, err
	}
	crashAt(CrashTempPartial)
	m, err := w.TempFile.Write(b[len(b)/2:])
	return n + m, err
}
