package pebble

// BenchmarkCommit measures synced commits on a real temporary directory:
// 1 and 16 concurrent committers × 10 and 1000 rows per commit, each commit
// naming a lease (as an epoch commit does). Keys increase per committer (like
// outbox rows); values are 40 bytes. Reported: commits/s and rows/s over all
// committers, and syncs/commit, the WAL fsyncs per commit, which shows group
// commit at work (well below 1 with 16 committers).
//
//	go test -run '^$' -bench BenchmarkCommit -count 3 ./store/pebble

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/store"
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
	lease, err := s.CreateLease(b.Context(), 1<<62)
	if err != nil {
		b.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 40))
	const table store.Table = "bench"

	var next atomic.Int64
	var wg sync.WaitGroup
	walSyncs.Store(0)
	b.ResetTimer()
	for c := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				txn := store.NewTxn(lease)
				for r := range rows {
					txn.Put(table, fmt.Appendf(nil, "c%02d-%012d-%04d", c, n, r), value)
				}
				if err := s.Commit(b.Context(), txn); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "commits/s")
	b.ReportMetric(float64(b.N*rows)/sec, "rows/s")
	b.ReportMetric(float64(walSyncs.Load())/float64(b.N), "syncs/commit")
}
