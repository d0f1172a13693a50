package pebble

// Damage under a Store: a flipped byte in a table and a deleted
// write-ahead log are reported as store.ErrCorrupt, naming the file, and
// a crash never looks like damage.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// fill commits n rows of about 100 bytes each in table "t", 100 per commit.
func fill(t *testing.T, s *Store, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		txn := store.NewTxn()
		for j := i; j < i+100 && j < n; j++ {
			txn.Put("t", []byte(fmt.Sprintf("k%06d", j)), []byte(strings.Repeat(fmt.Sprintf("%06d", j), 16)))
		}
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
}

func scanAll(s *Store) (int, error) {
	n := 0
	err := s.Scan(context.Background(), store.Range{Table: "t"}, func(k, v []byte) bool { n++; return true })
	return n, err
}

// TestCorruptTableStopsTheStore: a flipped byte in an .sst makes the read
// that meets it fail with store.ErrCorrupt naming the file, and every later
// call fails at once (the engine stops rather than retrying forever).
func TestCorruptTableStopsTheStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 5000)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("tables: %v", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, Options{Logger: quietLogger})
	if err == nil {
		defer s.Close()
		_, err = scanAll(s)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || !errors.Is(err, store.ErrUnusable) || ce.File != ssts[0] {
		t.Fatalf("read of a damaged table: %v (CorruptError %+v), want store.ErrCorrupt naming %s", err, ce, ssts[0])
	}
	if strings.Contains(err.Error(), "stack trace") || strings.Contains(err.Error(), ".go:") {
		t.Fatalf("the error carries a stack trace: %v", err)
	}
	if s != nil {
		_, _, err := s.Get(context.Background(), "t", []byte("k000001"))
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("a call after the damage was found: %v, want store.ErrCorrupt", err)
		}
	}
}

// TestDeletedLogIsDetected: the commits of a deleted write-ahead log are
// gone from Pebble without a word; Open notices through the commit marks
// and refuses, naming the log files. IgnoreLostCommits opens what is left.
func TestDeletedLogIsDetected(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	for _, l := range logs {
		os.Remove(l)
	}
	_, err = Open(dir, Options{Logger: quietLogger})
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "write-ahead log records are missing") {
		t.Fatalf("Open after deleting the logs: %v", err)
	}
	s, err = Open(dir, Options{Logger: quietLogger, IgnoreLostCommits: true})
	if err != nil {
		t.Fatalf("Open with IgnoreLostCommits: %v", err)
	}
	if n, err := scanAll(s); err != nil || n != 0 {
		t.Fatalf("what is left: %d rows, %v", n, err)
	}
	s.Close()
}

// TestCrashIsNotDamage: after a crash (unsynced writes lost) at any point
// of the commit-mark bookkeeping, Open succeeds with every acknowledged
// commit: COMMIT-MARK never names a commit that was not durable.
func TestCrashIsNotDamage(t *testing.T) {
	mem := vfs.NewCrashableMem()
	clk := clock.NewManual(testStart)
	s := openMem(t, mem, clk)
	for round := 0; round < 5; round++ {
		fill(t, s, 200)
		if round%2 == 0 {
			if err := s.writeCommitMark(); err != nil {
				t.Fatal(err)
			}
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(round), 7))})
		s.Close()
		mem = crashed
		s = openMem(t, mem, clk)
		if n, err := scanAll(s); err != nil || n != 200 {
			t.Fatalf("round %d: %d rows, %v", round, n, err)
		}
	}
	s.Close()
}
