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
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

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
