package pebble

// Unit tests of this backend's own mechanisms: key layout, timestamp counter
// overflow and ceiling reservation, lease-id blocks across reopens and when a
// block is used up, the layout-version guard and the quiet logger.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

var testStart = time.Date(2026, 7, 8, 9, 10, 11, 0, time.UTC)

func openMem(t *testing.T, fs vfs.FS, clk clock.Clock) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: fs, Clock: clk, Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestKeyLayout pins the documented key layout and the table bounds.
func TestKeyLayout(t *testing.T) {
	if got := rowKey("t", []byte("k")); string(got) != "t\x00k" {
		t.Errorf("rowKey = %q", got)
	}
	lo, hi := tableBounds("t", nil, nil)
	if string(lo) != "t\x00" || string(hi) != "t\x01" {
		t.Errorf("tableBounds(t, nil, nil) = %q, %q", lo, hi)
	}
	lo, hi = tableBounds("t", []byte("a"), []byte("b"))
	if string(lo) != "t\x00a" || string(hi) != "t\x00b" {
		t.Errorf("tableBounds(t, a, b) = %q, %q", lo, hi)
	}
	// No row key of any table falls in another table's bounds, and metadata
	// keys fall in none.
	for _, other := range []string{"t0\x00", "t_\x00", "ta\x00", "\x00weir\x00incarnation"} {
		lo, hi := tableBounds("t", nil, nil)
		if bytes.Compare([]byte(other), lo) >= 0 && bytes.Compare([]byte(other), hi) < 0 {
			t.Errorf("key %q falls inside table t", other)
		}
	}
	if got := userKey("t", rowKey("t", []byte("\x00\xff"))); string(got) != "\x00\xff" {
		t.Errorf("userKey = %q", got)
	}
}

// TestTimestampCounterOverflow: when the counter of the clock's second is used
// up, the next timestamp carries into the next second: strictly increasing,
// valid layout.
func TestTimestampCounterOverflow(t *testing.T) {
	clk := clock.NewManual(testStart)
	s := openMem(t, vfs.NewMem(), clk)
	defer s.Close()
	sec := uint64(testStart.Unix())
	s.ts.mu.Lock()
	s.ts.last = store.Timestamp(sec<<store.TimestampCounterBits | (1<<store.TimestampCounterBits - 2))
	s.ts.mu.Unlock()
	a, err := s.Timestamp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Timestamp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := store.Timestamp(sec<<store.TimestampCounterBits | (1<<store.TimestampCounterBits - 1)); a != want {
		t.Errorf("last timestamp of the second = %x, want %x", a, want)
	}
	if want := store.Timestamp((sec + 1) << store.TimestampCounterBits); b != want {
		t.Errorf("timestamp after the counter overflow = %x, want %x", b, want)
	}
}

// TestTimestampCeilingWritesAreRare: the synced ceiling write happens about
// once per TimestampReserve of clock time, not per timestamp; and a reopen
// starts at the persisted ceiling even if the clock went back.
func TestTimestampCeilingWritesAreRare(t *testing.T) {
	fs := vfs.NewMem()
	clk := clock.NewManual(testStart)
	s := openMem(t, fs, clk)
	var last store.Timestamp
	for range 10000 {
		clk.Advance(time.Millisecond) // 10 s in all
		ts, err := s.Timestamp(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = ts
	}
	if n := s.ts.ceilingWrites; n < 1 || n > 2 {
		t.Errorf("%d ceiling writes for 10 s of timestamps with a 10 s reserve, want 1 or 2", n)
	}
	ceiling := s.ts.ceiling
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Set(testStart.Add(-time.Hour))
	s = openMem(t, fs, clk)
	defer s.Close()
	ts, err := s.Timestamp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := store.Timestamp(ceiling << store.TimestampCounterBits); ts != want || ts <= last {
		t.Errorf("first timestamp after reopen = %x, want %x (> %x)", ts, want, last)
	}
}

// TestLeaseIDBlocks: each Open reserves a new id block; a process that uses up
// its block reserves the next one durably, so a reopen still starts above.
func TestLeaseIDBlocks(t *testing.T) {
	fs := vfs.NewMem()
	clk := clock.NewManual(testStart)
	block := func(id store.LeaseID) uint64 { return uint64(id) >> leaseCounterBits }
	s := openMem(t, fs, clk)
	a, err := s.CreateLease(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if block(a) != 1 || uint64(a)&maxLeaseCounter != 1 {
		t.Errorf("first lease id = %x, want block 1 counter 1", uint64(a))
	}
	// Use up the block.
	s.leases.mu.Lock()
	s.leases.next = maxLeaseCounter
	s.leases.mu.Unlock()
	b, _ := s.CreateLease(t.Context(), time.Minute)
	c, err := s.CreateLease(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if block(b) != 1 || uint64(b)&maxLeaseCounter != maxLeaseCounter || block(c) != 2 || uint64(c)&maxLeaseCounter != 1 {
		t.Errorf("ids around the block end = %x, %x", uint64(b), uint64(c))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, clk)
	defer s.Close()
	d, err := s.CreateLease(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if block(d) != 3 {
		t.Errorf("lease id after reopen = %x, want block 3", uint64(d))
	}
	for _, old := range []store.LeaseID{a, b, c} {
		if st, _ := s.LeaseState(t.Context(), old); st != store.LeaseUnknown {
			t.Errorf("lease %v of the earlier incarnation is %v, want unknown", old, st)
		}
	}
}

// TestOpenRejectsOtherLayout: a directory written with another key layout
// version is refused, not misread.
func TestOpenRejectsOtherLayout(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebbledb.Open("db", &pebbledb.Options{FS: fs, Logger: &pebbleLogger{log: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(metaFormat, encodeUint64(layoutVersion+1), pebbledb.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open("db", Options{FS: fs, Logger: quietLogger}); err == nil {
		s.Close()
		t.Fatal("Open of a directory with another layout version succeeded")
	}
	// The failed Open released the directory.
	db, err = pebbledb.Open("db", &pebbledb.Options{FS: fs, Logger: &pebbleLogger{log: quietLogger}})
	if err != nil {
		t.Fatalf("reopen after the refused Open: %v", err)
	}
	db.Close()
}

// countingHandler counts slog records.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingHandler) WithGroup(string) slog.Handler             { return h }

// TestQuietLogger: a normal open, write, flush, reopen cycle logs nothing
// (Pebble's informational messages are dropped), while Fatalf panics with a
// fatalPanic that breaks the Store.
func TestQuietLogger(t *testing.T) {
	var n atomic.Int64
	logger := slog.New(countingHandler{&n})
	fs := vfs.NewMem()
	for range 2 {
		s, err := Open("db", Options{FS: fs, Logger: logger, MemTableSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			txn := store.NewTxn()
			txn.Put("t", []byte{byte(i)}, bytes.Repeat([]byte("v"), 1000))
			if err := s.Commit(t.Context(), txn); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d log records from a normal run, want none", n.Load())
	}

	s := openMem(t, vfs.NewMem(), clock.Real{})
	defer s.Close()
	l := &pebbleLogger{log: logger, onFatal: s.markBroken}
	func() {
		defer func() {
			fp, ok := recover().(fatalPanic)
			if !ok || !errors.Is(fp.err, errBoom) {
				t.Errorf("Fatalf panicked with %#v, want a fatalPanic wrapping the cause", fp)
			}
		}()
		l.Fatalf("commit failed: %v", errBoom)
	}()
	if _, _, err := s.Get(t.Context(), "t", []byte("k")); !errors.Is(err, ErrBroken) {
		t.Errorf("Get after Fatalf: %v, want ErrBroken", err)
	}
	if n.Load() != 1 {
		t.Errorf("Fatalf logged %d records, want 1", n.Load())
	}
}

var errBoom = errors.New("boom")
