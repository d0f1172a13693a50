package storetest

// testZombieCommits is the zombie race of DESIGN.md §2 promise 2, run many
// times (and under -race in CI): a job goroutine commits in a loop with its
// lease L while a controller goroutine aborts L after a varying number of
// the job's commits. After AbortLease returns:
//
//   - no commit the job starts succeeds;
//   - no row of the job appears any more (the rows right after AbortLease
//     returned are the rows at the end: no write in flight lands later);
//   - the rows are exactly those of the commits reported successful.
//
// Half the iterations end the lease by expiry instead (the clock passes its
// timeout and the controller observes LeaseExpired), which must be the same
// barrier. Unlike testAbortBarrier's eight committers, one job commits back
// to back, as an epoch loop does, so the lease's end races a commit in
// flight in nearly every iteration.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// zombieIterations is how many races testZombieCommits runs.
const zombieIterations = 200

func testZombieCommits(t *testing.T, h Harness) {
	const timeout = 10 * time.Second
	s, clk := open(t, h)
	const table store.Table = "zombie"

	for iter := range zombieIterations {
		byExpiry := iter%2 == 1
		l, err := s.CreateLease(t.Context(), timeout)
		if err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf("%03d/", iter)
		var (
			ended       atomic.Bool
			lateSuccess atomic.Int64
			successes   atomic.Int64
			acked       []string
			jobErr      error
		)
		target := int64(iter % 7) // job commits to let through before the abort
		jobDone := make(chan struct{})
		go func() { // the job
			defer close(jobDone)
			for i := 0; ; i++ {
				startedAfterEnd := ended.Load()
				k := fmt.Sprintf("%s%06d", prefix, i)
				txn := store.NewTxn(l)
				txn.Put(table, []byte(k), []byte("zombie?"))
				err := s.Commit(t.Context(), txn)
				if err != nil {
					if !errors.Is(err, store.ErrLeaseLost) {
						jobErr = err
					}
					return
				}
				if startedAfterEnd {
					lateSuccess.Add(1)
				}
				acked = append(acked, k)
				successes.Add(1)
			}
		}()

		var atEnd []string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the controller
			defer wg.Done()
			for successes.Load() < target {
				select {
				case <-jobDone:
					return
				default:
				}
				// Busy-wait by yielding: the job needs only a few commits.
				runtime.Gosched()
			}
			if byExpiry {
				clk.Advance(timeout)
				if st, err := s.LeaseState(t.Context(), l); err != nil || st != store.LeaseExpired {
					t.Errorf("iteration %d: LeaseState after the timeout = %v, %v; want expired", iter, st, err)
				}
			} else if err := s.AbortLease(t.Context(), l); err != nil {
				t.Errorf("iteration %d: AbortLease: %v", iter, err)
			}
			ended.Store(true)
			atEnd = scanKeys(t, s, table, prefix)
		}()
		wg.Wait()
		<-jobDone

		if jobErr != nil {
			t.Fatalf("iteration %d: job commit failed with %v, want a lease-lost error", iter, jobErr)
		}
		if n := lateSuccess.Load(); n != 0 {
			t.Fatalf("iteration %d (expiry %v): %d commits started after the lease ended and succeeded", iter, byExpiry, n)
		}
		final := scanKeys(t, s, table, prefix)
		if !slices.Equal(final, atEnd) {
			t.Fatalf("iteration %d (expiry %v): rows changed after the lease ended:\nat end %v\nfinal  %v", iter, byExpiry, atEnd, final)
		}
		if !slices.Equal(final, acked) {
			t.Fatalf("iteration %d (expiry %v): rows %v, acknowledged commits %v", iter, byExpiry, final, acked)
		}
	}
}

func scanKeys(t *testing.T, s store.Store, table store.Table, prefix string) []string {
	t.Helper()
	var keys []string
	err := s.Scan(t.Context(), store.Range{Table: table, Lo: []byte(prefix), Hi: []byte(prefix + "\xff")},
		func(k, v []byte) bool { keys = append(keys, string(k)); return true })
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
