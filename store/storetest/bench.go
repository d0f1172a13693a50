package storetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-stream/weir/store"
)

// BenchCommits measures commits on s, the shape every backend's commit
// benchmark uses so that figures compare: committers concurrent
// committers, each commit writing rows rows and naming one lease (as an
// epoch commit does); keys increase per committer (like outbox rows);
// values are 40 bytes. It reports commits/s and rows/s over all
// committers; b.N is the number of commits.
func BenchCommits(b *testing.B, s store.Store, committers, rows int) {
	benchCommits(b, s, committers, rows, false)
}

// BenchCheckedCommits is BenchCommits with each commit guarded as an
// epoch commit is: it checks its committer's guard row (absent at first,
// then the value its previous commit wrote) and writes the next value.
func BenchCheckedCommits(b *testing.B, s store.Store, committers, rows int) {
	benchCommits(b, s, committers, rows, true)
}

func benchCommits(b *testing.B, s store.Store, committers, rows int, checked bool) {
	lease, err := s.CreateLease(b.Context(), 1<<62)
	if err != nil {
		b.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 40))
	const table store.Table = "bench"
	prev := make([][]byte, committers)
	Concurrently(b, committers, func(c int, n int64) error {
		txn := store.NewTxn(lease)
		var next []byte
		if checked {
			guard := fmt.Appendf(nil, "guard-%02d", c)
			if prev[c] == nil {
				txn.CheckAbsent(table, guard)
			} else {
				txn.CheckValue(table, guard, prev[c])
			}
			next = fmt.Appendf(nil, "%d", n)
			txn.Put(table, guard, next)
		}
		for r := range rows {
			txn.Put(table, fmt.Appendf(nil, "c%02d-%012d-%04d", c, n, r), value)
		}
		if err := s.Commit(b.Context(), txn); err != nil {
			return err
		}
		prev[c] = next
		return nil
	})
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "commits/s")
	b.ReportMetric(float64(b.N*rows)/sec, "rows/s")
}

// Concurrently makes b.N calls of fn, numbered 1..b.N, from workers
// goroutines (fn also gets its worker's index), timing only the calls.
// The first error fails b and stops its worker.
func Concurrently(b *testing.B, workers int, fn func(worker int, n int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if err := fn(w, n); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
}
