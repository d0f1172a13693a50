package pebble

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/store"
)

// TestTargetFileSize: a flush writes L0 tables of about TargetFileSize
// (512 KiB by default), not one table for the whole memtable — what keeps
// an L0 compaction from rewriting every base table between an epoch's
// tails (Options.TargetFileSize).
func TestTargetFileSize(t *testing.T) {
	for _, tc := range []struct {
		size      int64
		minTables int64
	}{{0, 5}, {4 << 20, 1}} {
		s, err := Open("", Options{FS: vfs.NewMem(), Logger: quietLogger, TargetFileSize: tc.size})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		txn := store.NewTxn()
		for i := range 3 << 10 { // 3 MiB of incompressible rows
			v := make([]byte, 1<<10)
			for j := 0; j < len(v); j += 8 {
				binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
			}
			txn.Put(store.States, binary.BigEndian.AppendUint32(nil, uint32(i)), v)
		}
		if err := s.Commit(context.Background(), txn); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		l0 := s.db.Metrics().Levels[0]
		if l0.TablesCount < tc.minTables || (tc.size > 0 && l0.TablesCount != 1) {
			t.Errorf("target %d: a 3 MiB flush wrote %d L0 tables", tc.size, l0.TablesCount)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
