package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/store"
)

// Damage to the files under a Store
//
// Pebble verifies a checksum on every block it reads. A mismatch (a flipped
// byte in an .sst) comes back from the read as a corruption error and is
// also reported to the event listener. Either way the Store marks itself
// broken with a *CorruptError: every later call fails with an error that
// matches store.ErrCorrupt and store.ErrUnusable, so the engine stops at
// once instead of restarting jobs that fail on the same block forever.
//
// A deleted or truncated write-ahead log is invisible to Pebble: it
// replays the log files it finds, and the acknowledged commits that were in
// a missing one are silently gone. weir detects it with commit marks:
//
//   - every batch the Store applies carries a commit number n (one counter
//     per Open, continuing from the largest number found in the store) in
//     the metadata key commitMarkKey(n mod commitMarkSlots);
//   - the largest n whose synced write has returned (so it is in the log
//     on disk) is written, now and then and at Close, to the file
//     COMMIT-MARK beside the database, with a checksum;
//   - Open reads the largest number in the marks. If it is below the one
//     in COMMIT-MARK, commits that were acknowledged are missing: Open fails
//     with a *CorruptError naming the log files.
//
// The check cannot raise a false alarm: COMMIT-MARK only ever names commits
// that were durable when it was written, and a mark slot only ever grows
// (a later number overwrites an earlier one; with commitMarkSlots slots, two
// numbers of one slot are 1024 commits apart, far more than commit
// concurrently). An unreadable COMMIT-MARK (a crash while it was written)
// skips the check.

// CorruptError says the data under the Store is damaged. It matches
// store.ErrCorrupt and store.ErrUnusable.
type CorruptError struct {
	// File is the damaged file (path), or the files concerned.
	File string
	// What describes the damage.
	What string
	// Err is Pebble's error, if any.
	Err error
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("pebble store: %s is damaged: %s", e.File, e.What)
	if e.Err != nil {
		s += ": " + e.Err.Error() // %v: no stack trace
	}
	return s
}

// Is makes errors.Is(err, store.ErrCorrupt) and errors.Is(err,
// store.ErrUnusable) true.
func (e *CorruptError) Is(target error) bool {
	return target == store.ErrCorrupt || target == store.ErrUnusable
}

// Unwrap returns Pebble's error.
func (e *CorruptError) Unwrap() error { return e.Err }

// corruption turns a Pebble corruption error into a *CorruptError and
// breaks the Store; other errors come back unchanged.
func (s *Store) corruption(err error) error {
	if err == nil || !pebbledb.IsCorruptionError(err) {
		return err
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		return err
	}
	ce = &CorruptError{File: damagedFile(s.dir, err), What: "a checksum or format check failed", Err: err}
	s.markBroken(ce)
	return ce
}

// damagedFile names the file a Pebble corruption error is about ("file
// 000020" in its message) as a path under dir, or dir itself.
func damagedFile(dir string, err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "file "); i >= 0 {
		num := msg[i+5:]
		n := 0
		for n < len(num) && num[n] >= '0' && num[n] <= '9' {
			n++
		}
		if n > 0 {
			return filepath.Join(dir, num[:n]+".sst")
		}
	}
	return dir
}

const (
	// commitMarkSlots is the number of commit mark keys.
	commitMarkSlots = 1024
	// commitMarkFile holds the largest durable commit number, beside the
	// database files.
	commitMarkFile = "COMMIT-MARK"
)

// metaCommitMark prefixes the commit mark keys.
var metaCommitMark = []byte("\x00weir\x00commit_mark\x00")

func commitMarkKey(n uint64) []byte {
	return binary.BigEndian.AppendUint16(append([]byte(nil), metaCommitMark...), uint16(n%commitMarkSlots))
}

// commitMarks numbers the Store's batches.
type commitMarks struct {
	next    atomic.Uint64 // last number handed out
	durable atomic.Uint64 // largest number whose synced write returned
	written atomic.Uint64 // largest number in COMMIT-MARK
}

// stamp adds the next commit number to b and returns it.
func (m *commitMarks) stamp(b *pebbledb.Batch) (uint64, error) {
	n := m.next.Add(1)
	return n, b.Set(commitMarkKey(n), encodeUint64(n), nil)
}

// done records that commit n is durable.
func (m *commitMarks) done(n uint64) {
	for {
		d := m.durable.Load()
		if d >= n || m.durable.CompareAndSwap(d, n) {
			return
		}
	}
}

// largestMark scans the mark keys for the largest commit number.
func largestMark(db *pebbledb.DB) (uint64, error) {
	hi := append(append([]byte(nil), metaCommitMark[:len(metaCommitMark)-1]...), 0x01)
	it, err := db.NewIter(&pebbledb.IterOptions{LowerBound: metaCommitMark, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	var largest uint64
	for ok := it.First(); ok; ok = it.Next() {
		if v := it.Value(); len(v) == 8 {
			largest = max(largest, binary.BigEndian.Uint64(v))
		}
	}
	return largest, errors.Join(it.Error(), it.Close())
}

// readCommitMark returns the number in COMMIT-MARK; ok is false when the
// file is missing or unreadable (no check is possible then).
func readCommitMark(fs vfs.FS, dir string) (n uint64, ok bool) {
	f, err := fs.Open(fs.PathJoin(dir, commitMarkFile))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil || len(b) != 12 {
		return 0, false
	}
	if crc32.ChecksumIEEE(b[:8]) != binary.BigEndian.Uint32(b[8:]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[:8]), true
}

// writeCommitMark records the durable commit number in COMMIT-MARK if it
// moved: a new file renamed over the old one, so a crash leaves the old
// file, the new one, or no file, never a wrong number that checks.
func (s *Store) writeCommitMark() error {
	n := s.marks.durable.Load()
	if n == s.marks.written.Load() || s.readOnly {
		return nil
	}
	b := binary.BigEndian.AppendUint64(nil, n)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	tmp := s.fs.PathJoin(s.dir, commitMarkFile+".tmp")
	f, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, s.fs.PathJoin(s.dir, commitMarkFile)); err != nil {
		return err
	}
	s.marks.written.Store(n)
	return nil
}

// checkCommitMarks compares the marks in the database with COMMIT-MARK
// and starts the numbering after the largest mark. It returns a
// *CorruptError when acknowledged commits are missing.
func (s *Store) checkCommitMarks(ignoreLost bool) error {
	largest, err := largestMark(s.db)
	if err != nil {
		return s.corruption(fmt.Errorf("pebble store: read commit marks: %w", err))
	}
	recorded, ok := readCommitMark(s.fs, s.dir)
	if ok && largest < recorded && !ignoreLost {
		return &CorruptError{
			File: filepath.Join(s.dir, "*.log"),
			What: fmt.Sprintf("commits up to #%d were acknowledged, but the store holds only those up to #%d: "+
				"write-ahead log records are missing (a .log file was deleted or truncated)", recorded, largest),
		}
	}
	s.marks.next.Store(max(largest, recorded))
	s.marks.durable.Store(largest)
	s.marks.written.Store(recorded)
	return nil
}

// noPreallocFS is the FS under a Store: files are not preallocated. Pebble
// preallocates each write-ahead log to 110% of the memtable size (70 MiB
// with weir's 64 MiB memtables), which made every data directory, however
// small its data, 71 MB on disk. Without it a log grows as it is written,
// which costs a little more metadata work per sync.
type noPreallocFS struct{ vfs.FS }

func (fs noPreallocFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

func (fs noPreallocFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

type noPreallocFile struct{ vfs.File }

func (noPreallocFile) Preallocate(offset, length int64) error { return nil }

// markCorrupt breaks the Store for a corruption Pebble found (in a read or
// a background compaction). It does not log: every later call returns the
// *CorruptError, so the caller reports it once (Pebble's own report carries
// stack traces).
func (s *Store) markCorrupt(info pebbledb.DataCorruptionInfo) {
	s.markBroken(&CorruptError{File: info.Path, What: "a checksum or format check failed", Err: info.Details})
}
