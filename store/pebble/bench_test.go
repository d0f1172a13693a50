package pebble

// BenchmarkCommit measures synced commits on a real temporary directory:
// 1 and 16 concurrent committers × 10 and 1000 rows per commit, each commit
// naming a lease (as an epoch commit does), in the shape every backend uses
// (storetest.BenchCommits; store/postgres runs it side by side with this
// backend). Reported: commits/s and rows/s over all committers, and
// syncs/commit, the WAL fsyncs per commit, which shows group commit at work
// (well below 1 with 16 committers).
//
//	go test -run '^$' -bench BenchmarkCommit -count 3 ./store/pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/storetest"
)

func BenchmarkCommit(b *testing.B) {
	for _, committers := range []int{1, 16} {
		for _, rows := range []int{10, 1000} {
			b.Run(fmt.Sprintf("committers=%d/rows=%d", committers, rows), func(b *testing.B) {
				benchCommit(b, committers, rows)
			})
		}
	}
}

func benchCommit(b *testing.B, committers, rows int) {
	var walSyncs atomic.Int64
	countSyncs := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && slices.Contains(walSyncOps, op.Kind) {
			walSyncs.Add(1)
		}
		return nil
	})
	s, err := Open(b.TempDir(), Options{FS: wrapFS(vfs.Default, countSyncs), Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	walSyncs.Store(0)
	storetest.BenchCommits(b, s, committers, rows)
	b.ReportMetric(float64(walSyncs.Load())/float64(b.N), "syncs/commit")
}

// BenchmarkEpochCommit: commits shaped like an exactly-once epoch's — 1000
// state rows keyed by a hash over 10,000 keys (scattered), 1000 output
// rows with increasing keys and a few dedup-frontier rows, interleaved as
// a job builds them — on an in-memory filesystem, so that the figure is
// the CPU of building the batch and inserting it into the memtable.
// "presorted" builds the same rows already in key order.
//
//	go test -run '^$' -bench BenchmarkEpochCommit -count 5 ./store/pebble
func BenchmarkEpochCommit(b *testing.B) {
	for _, presorted := range []bool{false, true} {
		b.Run(fmt.Sprintf("presorted=%v", presorted), func(b *testing.B) {
			s, err := Open("", Options{FS: vfs.NewMem(), Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			out := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				txn := store.NewTxn()
				var keys [][]byte
				for range 1000 {
					k := binary.BigEndian.AppendUint64([]byte("Counter\x00"), rng.Uint64N(10000)*0x9e3779b97f4a7c15)
					keys = append(keys, k)
					if !presorted {
						txn.Put(store.States, k, []byte("12345678"))
						txn.Put(store.OutputMessages, binary.BigEndian.AppendUint64([]byte("Counter/0\x00"), out), make([]byte, 60))
					}
					out++
				}
				if presorted {
					slices.SortFunc(keys, bytes.Compare)
					for _, k := range keys {
						txn.Put(store.States, k, []byte("12345678"))
					}
					for i := range 1000 {
						txn.Put(store.OutputMessages, binary.BigEndian.AppendUint64([]byte("Counter/0\x00"), out-1000+uint64(i)), make([]byte, 60))
					}
					// (table order: partition_output_messages < states)
					muts := txn.Mutations()
					slices.SortStableFunc(muts, func(a, b store.Mutation) int { return compareRow(&a, &b) })
				}
				if err := s.Commit(ctx, txn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
