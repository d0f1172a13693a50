// Package pebble is weir's embedded store backend: a store.Store on a local
// Pebble database (github.com/cockroachdb/pebble/v2).
//
// Durability: every Commit that writes is applied as one Pebble batch with
// pebbledb.Sync, so it is in the fsync'd write-ahead log when Commit returns.
// Pebble group-commits concurrent synced batches: committers that arrive while
// a WAL sync is in progress share the next one, so many concurrent commits
// cost one fsync (BenchmarkCommit reports syncs/commit).
//
// Leases live in memory. Only one process can open a Pebble directory (Pebble
// holds a file lock), so every job that can hold a lease of this store runs in
// this process and dies with it; leases of an earlier incarnation are
// LeaseUnknown after a reopen, and lease ids are never reused because each
// Open reserves a new block of ids under a persisted, synced counter (see
// leases.go). Timestamps stay unique across restarts the same way (see
// timestamp.go). The key layout is documented in keys.go.
//
// Failure model: if Pebble fails to commit a batch (an I/O error on the WAL),
// the commit may or may not be in the log, so Commit returns a
// *store.AmbiguousError and the Store becomes broken: every later Get, Scan,
// Commit, CreateLease, PingLease and Timestamp fails fast with an error
// matching ErrBroken (store.ClassFatal). Reads must fail too, because Pebble
// has already applied the failed batch to its memtable, and a reader that
// resolves the ambiguous commit on this handle would see data that may not
// survive a restart. The caller must Close the Store and Open the directory
// again: recovery replays only what reached the log, so the reopened store is
// consistent (every acknowledged commit present, every ambiguous one wholly
// present or wholly absent), and reads on it resolve the ambiguity truthfully.
// AbortLease, LeaseState, Now and Close keep working on a broken Store.
// A full disk breaks the Store with a *NoSpaceError, which is neither damage
// nor lost data (see nospace.go).
// Pebble itself panics on a few unrecoverable failures (a failed MANIFEST
// sync in a background flush, a failed WAL rotation); like Pebble's default
// logger exiting the process, those end the process, and a restart recovers.
//
// Visibility: Pebble makes a batch visible to readers once it is in the WAL
// buffer and the memtable, before its fsync has returned. A concurrent Get or
// Scan may therefore observe a commit whose Commit call has not returned yet
// and that a power loss could still undo. Whatever the reader commits after
// that lands later in the same WAL, so it cannot survive a crash that loses
// the commit it read: derived store state stays consistent. Only an external
// effect taken on such a read (sending data read from another job's rows) is
// exposed; weir performs external effects after its own commit returned.
package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// ErrBroken matches the errors of a Store that an earlier write failure left
// in an unknown state. It wraps store.ErrUnusable and classifies as
// store.ClassFatal: close the Store and open it again.
var ErrBroken = fmt.Errorf("pebble store: broken by an earlier write failure: %w", store.ErrUnusable)

// Defaults of the Options. They are sized for a streaming engine with a
// memory budget of a few hundred MiB: memtables are the main lever (see
// /work/shared/reference/performance-notes.md: larger memtables and a higher
// L0 threshold keep short-lived rows out of compactions).
const (
	DefaultMemTableSize                = 8 << 20
	DefaultMemTableStopWritesThreshold = 4
	DefaultCacheSize                   = 16 << 20
	DefaultL0CompactionThreshold       = 8
	DefaultL0StopWritesThreshold       = 24
	DefaultTargetFileSize              = 512 << 10
	DefaultMaxConcurrentCompactions    = 2
	DefaultTimestampReserve            = 10 * time.Second
)

// Options configures a Store. The zero value is usable: every zero field
// takes its default.
type Options struct {
	// FS is the filesystem the database lives on. Default vfs.Default (the
	// OS). Tests pass vfs.NewMem, vfs.NewCrashableMem or an errorfs.
	FS vfs.FS
	// Clock is the store's clock: it decides lease expiry and the seconds of
	// Timestamps. Default clock.Real{}.
	Clock clock.Clock
	// Logger receives Pebble's error messages (background flush or compaction
	// failures, which Pebble retries). Pebble's informational messages are
	// dropped. Default slog.Default().
	Logger *slog.Logger

	// MemTableSize is the size of one memtable. Writes land in the active
	// memtable; a full one is flushed to an L0 table in the background. Bigger
	// memtables mean fewer, larger flushes and let short-lived rows (dedup ids,
	// delivered outbox rows) be deleted before they reach a table at all;
	// but a memtable is resident memory as it fills, and with dedup by
	// frontiers few rows are that short-lived. Default 8 MiB: against 64 MiB
	// it took ~80 MiB off the counter's peak RSS at a million messages for
	// no more CPU per message; 4 MiB saved no more (docs/performance.md,
	// issue 24, stop 34).
	MemTableSize uint64
	// MemTableStopWritesThreshold is how many memtables (active plus those
	// queued for flush) may exist before commits stall. Together with
	// MemTableSize it bounds memtable memory: 4 × 8 MiB = 32 MiB at worst,
	// one or two 8 MiB memtables in steady state. Default 4.
	MemTableStopWritesThreshold int
	// CacheSize is the block cache for reading tables. Default 16 MiB: a
	// source reading a backlog fills any cache with blocks it reads once.
	CacheSize int64
	// L0CompactionThreshold is the L0 read amplification (number of
	// overlapping L0 sublevels) at which an L0 compaction starts. A higher
	// value lets flushed tables accumulate and be compacted together, which
	// lowers write amplification for the interleaved key ranges of an epoch.
	// Default 8 (Pebble: 4).
	L0CompactionThreshold int
	// L0StopWritesThreshold is the L0 read amplification at which commits
	// stall until compactions catch up. Default 24 (Pebble: 12); it must stay
	// well above L0CompactionThreshold.
	L0StopWritesThreshold int
	// TargetFileSize is the size of the tables a flush writes to L0; each
	// level below takes twice the size of the one above, counted from the
	// base level (Pebble's rule). Default 512 KiB (Pebble: 2 MiB).
	//
	// Why small: an epoch's rows land at a few tails far apart in the key
	// space — each queue partition's end, the outputs', the states — so one
	// large flushed table spans all of them, and compacting it into the
	// base level rewrites every base table between its first and last key:
	// most of the store, again at each L0 compaction. Small flushed tables
	// each cover one tail, and overlap only the base tables at that tail.
	// Measured with weir bench against 2 MiB (docs/performance.md, issue 24,
	// stop 36): the bytes the process wrote per message fell 15–18% on every
	// row, whose input is written before the clock (a backlog), and 22% on
	// the latency row at 70,000 msg/s over 1.2M messages (written as it is
	// read); compactions wrote 94 → 31–41 MB on the counter's 600,000
	// messages. Files stay small only while the store is: as it grows, its
	// base level moves up and the bottom level's tables grow with it. It
	// is an option, not a format: a store written with other sizes keeps
	// its tables, and compactions write new ones at this size.
	TargetFileSize int64
	// MaxConcurrentCompactions caps the background compactions that run at
	// once when compaction debt builds up. Default 2.
	MaxConcurrentCompactions int
	// TimestampReserve is how far ahead of the issued timestamps the persisted
	// timestamp ceiling is moved; each move is one synced write, so a larger
	// reserve means rarer syncs, and timestamps after a restart start at most
	// this far in the future. Default 10 s.
	TimestampReserve time.Duration

	// ReadOnly opens the database without writing anything: no new log,
	// no lease-id reservation; Commit, CreateLease and Timestamp fail. For
	// inspection (weir queue read, weir store check) of a stopped pipeline.
	// The directory must exist.
	ReadOnly bool
	// IgnoreLostCommits opens a store whose write-ahead log lost
	// acknowledged commits (see damage.go) instead of failing with a
	// *CorruptError, so that what is left can be inspected.
	IgnoreLostCommits bool

	// Tune, if set, is called with the final Pebble options just before the
	// database is opened. It is an escape hatch for experiments and benchmarks;
	// it must not change FS, Logger, EventListener or Comparer.
	Tune func(*pebbledb.Options)
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.MemTableStopWritesThreshold <= 0 {
		o.MemTableStopWritesThreshold = DefaultMemTableStopWritesThreshold
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.L0CompactionThreshold <= 0 {
		o.L0CompactionThreshold = DefaultL0CompactionThreshold
	}
	if o.L0StopWritesThreshold <= 0 {
		o.L0StopWritesThreshold = DefaultL0StopWritesThreshold
	}
	if o.TargetFileSize <= 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if o.MaxConcurrentCompactions <= 0 {
		o.MaxConcurrentCompactions = DefaultMaxConcurrentCompactions
	}
	if o.TimestampReserve <= 0 {
		o.TimestampReserve = DefaultTimestampReserve
	}
	return o
}

// Store is a store.Store on a Pebble database. Create it with Open.
type Store struct {
	db       *pebbledb.DB
	dir      string
	fs       vfs.FS
	log      *slog.Logger
	clock    clock.Clock
	readOnly bool
	// largeBatch: a batch at least this long takes Pebble's path for large
	// batches, which rotates the write-ahead log first (roomForBatch).
	largeBatch uint64

	// marks numbers the batches for the lost-log check (damage.go);
	// stopMarks ends the goroutine that writes COMMIT-MARK.
	marks     commitMarks
	stopMarks chan struct{}
	marksDone chan struct{}

	// mu guards closed; inflight counts the calls in progress. Close sets
	// closed (so no new call starts) and then waits for inflight to drain,
	// so Pebble is never used after it is closed (Pebble panics then).
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup

	// brokenMu guards broken: the first write failure, after which the
	// Store refuses reads and writes (see the package comment).
	brokenMu sync.Mutex
	broken   error
	// brokenCh is closed when the Store breaks: barrier waits give up then.
	brokenCh chan struct{}
	// wedged: Pebble panicked inside a commit, possibly holding its own
	// locks; nothing may call into Pebble any more, Close included.
	wedged atomic.Bool

	// checkMu makes a check and its commit's write one atomic step with
	// respect to every other commit: a commit that carries Checks holds it
	// for writing from the evaluation of its checks until its write
	// returned; every other commit that writes holds it for reading while
	// it writes, so no write lands between a check and its commit's write
	// (store.Check). Commits without checks still run concurrently with
	// each other.
	checkMu sync.RWMutex

	leases leaseTable
	ts     timestampOracle
	seqs   sequences
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. It bumps the persisted
// lease-id block with a synced write before returning, so the ids it hands
// out were never used by an earlier incarnation.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	s := &Store{dir: dir, fs: noPreallocFS{opts.FS}, log: opts.Logger, clock: opts.Clock, readOnly: opts.ReadOnly, brokenCh: make(chan struct{})}
	s.ts.reserve = opts.TimestampReserve
	s.largeBatch = opts.MemTableSize / 4 // Pebble's threshold is about half a memtable: a margin below it

	logger := &pebbleLogger{log: opts.Logger, onFatal: s.markBroken, onCorrupt: s.markCorrupt, onNoSpace: s.markBroken, exitNoSpace: s.exitNoSpace}
	po := &pebbledb.Options{
		FS:                          s.fs,
		ReadOnly:                    opts.ReadOnly,
		Logger:                      logger,
		EventListener:               eventListener(logger),
		FormatMajorVersion:          pebbledb.FormatNewest,
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: opts.MemTableStopWritesThreshold,
		CacheSize:                   opts.CacheSize,
		L0CompactionThreshold:       opts.L0CompactionThreshold,
		L0StopWritesThreshold:       opts.L0StopWritesThreshold,
	}
	for i := range po.TargetFileSizes {
		po.TargetFileSizes[i] = opts.TargetFileSize << i
	}
	maxCompactions := opts.MaxConcurrentCompactions
	po.CompactionConcurrencyRange = func() (int, int) { return 1, maxCompactions }
	if opts.ReadOnly {
		po.FS = roLockFS{FS: s.fs} // readable on a read-only mount too
	}
	if opts.Tune != nil {
		opts.Tune(po)
	}
	if opts.ReadOnly {
		if _, err := opts.FS.Stat(dir); err != nil {
			return nil, fmt.Errorf("pebble store: open %s read-only: %w", dir, err)
		}
	}
	if !opts.ReadOnly {
		if err := pendingOpen(opts.FS, dir); err != nil {
			return nil, err
		}
		if err := checkSpace(opts.FS, dir); err != nil {
			return nil, err
		}
	}
	db, err := s.openPebble(dir, po)
	if err != nil {
		var ns *NoSpaceError
		if errors.As(err, &ns) {
			return nil, err
		}
		if pebbledb.IsCorruptionError(err) {
			return nil, &CorruptError{File: damagedFile(dir, err), What: "Pebble cannot open it", Err: err}
		}
		return nil, fmt.Errorf("pebble store: open %s: %w", dir, err)
	}
	s.db = db
	err = s.checkCommitMarks(opts.IgnoreLostCommits)
	if err == nil {
		err = s.init()
	}
	if err != nil {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("pebble store: close after failed open: %w", cerr))
		}
		return nil, err
	}
	s.stopMarks, s.marksDone = make(chan struct{}), make(chan struct{})
	go s.commitMarkLoop()
	return s, nil
}

// openPebble runs pebbledb.Open. On a full disk Pebble's Open waits
// forever for the flush of the recovered write-ahead log (see nospace.go):
// when the Store breaks for lack of space meanwhile, openPebble returns the
// *NoSpaceError and leaves Pebble's Open running; it closes the database
// once that Open returns (space was freed), and pendingOpens refuses
// another Open of dir until then.
func (s *Store) openPebble(dir string, po *pebbledb.Options) (*pebbledb.DB, error) {
	type result struct {
		db  *pebbledb.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := pebbledb.Open(dir, po)
		done <- result{db, err}
	}()
	select {
	case r := <-done:
		return r.db, r.err
	case <-s.brokenCh:
	}
	var ns *NoSpaceError
	if !errors.As(s.brokenErr(), &ns) {
		r := <-done // a corruption: Pebble's Open fails by itself
		return r.db, r.err
	}
	finished := make(chan struct{})
	pendingOpens.Store(openKey(dir), finished)
	go func() {
		if r := <-done; r.err == nil {
			r.db.Close()
		}
		close(finished)
	}()
	return nil, ns
}

// commitMarkPeriod is how often COMMIT-MARK is brought up to date.
const commitMarkPeriod = time.Second

// commitMarkLoop writes COMMIT-MARK every commitMarkPeriod until Close.
func (s *Store) commitMarkLoop() {
	defer close(s.marksDone)
	t := time.NewTicker(commitMarkPeriod)
	defer t.Stop()
	for {
		select {
		case <-s.stopMarks:
			return
		case <-t.C:
			if s.brokenErr() == nil {
				if err := s.writeCommitMark(); err != nil {
					s.markBroken(fmt.Errorf("pebble store: write %s: %w", commitMarkFile, err))
				}
			}
		}
	}
}

// init checks the layout version, reserves a new lease-id block and loads the
// timestamp ceiling.
func (s *Store) init() error {
	format, ok, err := s.getMeta(metaFormat)
	if err != nil {
		return err
	}
	if ok && format != layoutVersion {
		return fmt.Errorf("pebble store: %s has key layout version %d, this build reads version %d", s.dir, format, layoutVersion)
	}
	inc, _, err := s.getMeta(metaIncarnation)
	if err != nil {
		return err
	}
	if s.readOnly {
		t := &s.leases
		t.byID, t.block, t.next = map[store.LeaseID]*lease{}, inc+1, 1
		ceiling, _, err := s.getMeta(metaTimestampCeiling)
		s.ts.init(ceiling)
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if !ok {
		if err := b.Set(metaFormat, encodeUint64(layoutVersion), nil); err != nil {
			return fmt.Errorf("pebble store: %w", err)
		}
	}
	if err := s.leases.init(s, b, inc); err != nil {
		return err
	}
	if err := s.apply(b); err != nil {
		return fmt.Errorf("pebble store: open %s: reserve lease ids: %w", s.dir, err)
	}
	ceiling, _, err := s.getMeta(metaTimestampCeiling)
	if err != nil {
		return err
	}
	s.ts.init(ceiling)
	return nil
}

// getMeta reads a uint64 metadata value.
func (s *Store) getMeta(key []byte) (uint64, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.corruption(fmt.Errorf("pebble store: read metadata %q: %w", key, err))
	}
	defer closer.Close()
	n, err := decodeUint64(string(key[1:]), v)
	return n, err == nil, err
}

// enter registers a call in progress; it fails once Close has begun. Every
// successful enter must be paired with exit.
func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

func (s *Store) exit() { s.inflight.Done() }

// enterUsable is enter plus a check that the Store is not broken.
func (s *Store) enterUsable() error {
	if err := s.enter(); err != nil {
		return err
	}
	if err := s.brokenErr(); err != nil {
		s.exit()
		return err
	}
	return nil
}

// markBroken records the first write failure. Safe to call more than once and
// from Pebble's logger.
func (s *Store) markBroken(cause error) {
	if isNoSpace(cause) {
		cause = noSpaceError(s.fs, s.dir, cause)
	}
	s.brokenMu.Lock()
	defer s.brokenMu.Unlock()
	if s.broken == nil {
		s.broken = cause
		close(s.brokenCh)
	}
}

// brokenErr returns a ErrBroken error if the Store is broken, else nil.
func (s *Store) brokenErr() error {
	s.brokenMu.Lock()
	defer s.brokenMu.Unlock()
	if s.broken == nil {
		return nil
	}
	return fmt.Errorf("%w (first failure: %w)", ErrBroken, s.broken)
}

// Close waits for calls in progress to finish and closes Pebble. Later calls
// fail with store.ErrClosed, Close included. REQUIRES: not called from a Scan
// callback (it would wait for that Scan).
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stopMarks)
	<-s.marksDone
	drained := make(chan struct{})
	go func() { s.inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-s.closeWait():
		// Only a broken Store gets here: a write failure can leave Pebble's
		// commit pipeline locked (Pebble panics mid-commit), and calls stuck
		// inside it never return. Do not close Pebble under them; the
		// process must exit to release the directory.
		return fmt.Errorf("pebble store: close %s: calls still stuck in Pebble after the store broke: %w", s.dir, s.brokenErr())
	}
	if s.wedged.Load() {
		return fmt.Errorf("pebble store: close %s: Pebble panicked in a commit and may hold its locks; the process must exit to release the directory: %w", s.dir, s.brokenErr())
	}
	var markErr error
	if s.brokenErr() == nil {
		markErr = s.writeCommitMark()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebble store: close %s: %w", s.dir, err)
	}
	if markErr != nil {
		return fmt.Errorf("pebble store: close %s: write %s: %w", s.dir, commitMarkFile, markErr)
	}
	return nil
}

// closeWait returns a channel that fires when Close should stop waiting for
// in-flight calls: never for a healthy Store, after 5 seconds for a broken
// one.
func (s *Store) closeWait() <-chan time.Time {
	if s.brokenErr() == nil {
		return nil
	}
	return time.After(5 * time.Second)
}

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Get returns a copy of the committed value of key in table.
func (s *Store) Get(ctx context.Context, table store.Table, key []byte) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !table.Valid() {
		return nil, false, fmt.Errorf("pebble store: get: invalid table name %q", table)
	}
	if err := s.enterUsable(); err != nil {
		return nil, false, err
	}
	defer s.exit()
	return s.get(table, key)
}

func (s *Store) get(table store.Table, key []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(rowKey(table, key))
	if errors.Is(err, pebbledb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.corruption(fmt.Errorf("pebble store: get %s: %w", table, err))
	}
	out := make([]byte, len(v))
	copy(out, v)
	if err := closer.Close(); err != nil {
		return nil, false, fmt.Errorf("pebble store: get %s: %w", table, err)
	}
	return out, true, nil
}

// scanCtxEvery is how many rows Scan visits between checks of its context.
const scanCtxEvery = 256

// Scan calls fn for the committed rows of r in key order (reverse order if
// r.Reverse). It reads a consistent snapshot: rows committed during the scan
// are not seen. An inverted range (Lo > Hi) is empty. A negative Limit is an
// error. fn may call the Store's other methods, except Close (which waits
// for the Scan to finish).
func (s *Store) Scan(ctx context.Context, r store.Range, fn func(key, value []byte) bool) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !r.Table.Valid() {
		return fmt.Errorf("pebble store: scan: invalid table name %q", r.Table)
	}
	if r.Limit < 0 {
		return fmt.Errorf("pebble store: scan %s: negative limit %d", r.Table, r.Limit)
	}
	if r.Hi != nil && bytes.Compare(r.Lo, r.Hi) >= 0 {
		return nil
	}
	if err := s.enterUsable(); err != nil {
		return err
	}
	defer s.exit()

	lo, hi := tableBounds(r.Table, r.Lo, r.Hi)
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("pebble store: scan %s: %w", r.Table, err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("pebble store: scan %s: %w", r.Table, cerr)
		}
		err = s.corruption(err)
	}()
	step := it.Next
	valid := it.First()
	if r.Reverse {
		step = it.Prev
		valid = it.Last()
	}
	for n := 0; valid; valid = step() {
		if r.Limit > 0 && n >= r.Limit {
			return nil
		}
		n++
		if n%scanCtxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("pebble store: scan %s: %w", r.Table, err)
		}
		if !fn(userKey(r.Table, it.Key()), v) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("pebble store: scan %s: %w", r.Table, err)
	}
	return nil
}
