package pebble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Problem is one thing CheckFiles found damaged.
type Problem struct {
	// File is the damaged file (a path under the directory), or the
	// directory for problems of the whole database.
	File string
	// What says what is wrong.
	What string
}

// CheckReport is what CheckFiles verified.
type CheckReport struct {
	// Tables is the number of .sst files whose every block checksum was
	// verified.
	Tables int
	// Opened: Pebble opened the database read-only. LevelsChecked: its
	// level check passed, visiting Keys point keys.
	Opened, LevelsChecked bool
	Keys                  int64
	// CommitsHeld and CommitsAcknowledged are the commit marks (damage.go):
	// the largest commit number the data holds and the largest COMMIT-MARK
	// says was acknowledged (0 when it has none).
	CommitsHeld, CommitsAcknowledged uint64
	// Problems lists the damage found, by file.
	Problems []Problem
	// Leftovers lists table files that are no part of the database (not
	// in its MANIFEST): what a flush or compaction that failed midway, on
	// a full disk for example, leaves behind, often with zero bytes.
	// Pebble ignores them and deletes them at its next read-write open;
	// they are not damage, and their checksums are not checked.
	Leftovers []Problem
	// ReadOnlyFS: the directory is on a read-only filesystem, so the
	// check ran without Pebble's directory lock (see roLockFS).
	ReadOnlyFS bool
}

// CheckFiles verifies the database in dir without writing to it:
//
//   - the checksum of every block of every table (.sst), each file on its
//     own, so that every damaged table is named, not just the first;
//   - that Pebble can open it read-only (MANIFEST and logs readable);
//   - Pebble's level invariants (keys ordered, levels consistent), which
//     reads every key;
//   - the commit marks: no acknowledged commit is missing from the logs.
//
// Table files the MANIFEST does not name are leftovers (CheckReport.Leftovers),
// not damage; a read-only filesystem is noted (CheckReport.ReadOnlyFS), and
// checked all the same.
//
// err is for a check that could not run (dir missing, the database locked
// by a running process); damage is reported in the CheckReport.
func CheckFiles(dir string, opts Options) (*CheckReport, error) {
	opts = opts.withDefaults()
	fs := opts.FS
	if _, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("pebble store: check %s: %w", dir, err)
	}
	rep := &CheckReport{}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("pebble store: check %s: %w", dir, err)
	}
	sort.Strings(names)
	var readOnlyFS atomic.Bool
	po := &pebbledb.Options{FS: roLockFS{FS: fs, hit: &readOnlyFS}, ReadOnly: true, Logger: &pebbleLogger{log: opts.Logger, onFatal: func(error) {}}}
	po.EnsureDefaults()
	ro := po.MakeReaderOptions()
	po.EventListener = &pebbledb.EventListener{DataCorruption: func(pebbledb.DataCorruptionInfo) {}}
	db, openErr := pebbledb.Open(dir, po)
	if openErr != nil && isLockError(openErr) {
		// A running weir holds it: say so before reading every table.
		return nil, fmt.Errorf("pebble store: check %s: %w (is a weir running on it?)", dir, openErr)
	}
	rep.ReadOnlyFS = readOnlyFS.Load()
	// The tables the MANIFEST names; nil if Pebble cannot open it (then
	// every table file is checked).
	var live map[string]bool
	if openErr == nil {
		if levels, err := db.SSTables(); err == nil {
			live = map[string]bool{}
			for _, level := range levels {
				for _, t := range level {
					live[fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum))] = true
				}
			}
		}
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		path := fs.PathJoin(dir, name)
		if live != nil && !live[name] {
			size := int64(-1)
			if fi, err := fs.Stat(path); err == nil {
				size = fi.Size()
			}
			rep.Leftovers = append(rep.Leftovers, Problem{File: path, What: fmt.Sprintf(
				"%d bytes, not part of the database (a leftover of a flush or compaction that failed, e.g. on a full disk): "+
					"Pebble ignores it and deletes it at the next read-write open", size)})
			continue
		}
		if err := checkTable(fs, path, ro); err != nil {
			// The reader does not know the file's number: drop its "file
			// 000000" and keep the first line (no detail carriers).
			what := strings.ReplaceAll(firstLine(err), "pebble: file 000000: ", "")
			rep.Problems = append(rep.Problems, Problem{File: path, What: what})
		}
		rep.Tables++
	}
	if openErr != nil {
		err := openErr
		rep.Problems = append(rep.Problems, Problem{File: damagedFile(dir, err), What: "Pebble cannot open the database: " + firstLine(err)})
		return rep, nil
	}
	defer db.Close()
	rep.LevelsChecked = true
	var stats pebbledb.CheckLevelsStats
	if err := db.CheckLevels(&stats); err != nil {
		rep.Problems = append(rep.Problems, Problem{File: damagedFile(dir, err), What: "level check: " + firstLine(err)})
		rep.LevelsChecked = false
	}
	rep.Keys = stats.NumPoints
	rep.Opened = true
	held, err := largestMark(db)
	if err != nil {
		rep.Problems = append(rep.Problems, Problem{File: damagedFile(dir, err), What: "read the commit marks: " + firstLine(err)})
	}
	rep.CommitsHeld = held
	if ack, ok := readCommitMark(fs, dir); ok {
		rep.CommitsAcknowledged = ack
		if held < ack {
			rep.Problems = append(rep.Problems, Problem{File: filepath.Join(dir, "*.log"),
				What: fmt.Sprintf("commits up to #%d were acknowledged, but the store holds only those up to #%d: write-ahead log records are missing (a .log file was deleted or truncated)", ack, held)})
		}
	}
	return rep, nil
}

// firstLine is the first line of err's message.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// checkTable verifies every block checksum of one table file.
func checkTable(fs vfs.FS, path string, ro sstable.ReaderOptions) (err error) {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		readable.Close()
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	return r.ValidateBlockChecksums()
}

// roLockFS lets a read-only open work on a read-only filesystem (a store
// mounted read-only, a snapshot): Pebble locks the directory even to read
// it, creating its LOCK file, which fails there with EROFS. Nothing can
// write to the database through a read-only mount, so the lock is skipped
// (and hit set); only a writer through another, writable mount of the
// same files would go unnoticed.
type roLockFS struct {
	vfs.FS
	hit *atomic.Bool
}

func (fs roLockFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	if err != nil && errors.Is(err, syscall.EROFS) {
		if fs.hit != nil {
			fs.hit.Store(true)
		}
		return noLock{}, nil
	}
	return c, err
}

type noLock struct{}

func (noLock) Close() error { return nil }

// isLockError reports whether err, from opening a store, says another
// process holds its lock (not damage).
func isLockError(err error) bool {
	return !pebbledb.IsCorruptionError(err) && !errors.Is(err, pebbledb.ErrCorruption) && strings.Contains(err.Error(), "lock")
}
