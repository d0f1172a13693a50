package pebble

// Crash (power loss) simulation on Pebble's crashable in-memory filesystem.
//
// TestCrashRecovery proves that Commit is durable on return and atomic across
// a power loss: concurrent committers write multi-row, multi-table
// transactions with recognisable contents, a crash is simulated at a random
// moment (vfs.MemFS.CrashClone: only synced data is guaranteed to survive; a
// random share of unsynced blocks and directory entries does), and the store
// is reopened on the crashed filesystem. Then, for every committer:
//
//   - every acknowledged commit is wholly present;
//   - every other commit is wholly present or wholly absent, and the present
//     ones form a prefix of the committer's sequence (no commit survives
//     while an earlier one of the same committer is lost);
//   - the range deletion in each commit replayed atomically with its puts;
//   - timestamps issued after the reopen are above every timestamp returned
//     before the crash, and lease ids of the new incarnation are fresh.
//
// Each seed runs two crash rounds (the second on the recovered store). Seeds:
// -crash.seeds=N (or WEIR_CRASH_SEEDS=N) runs seeds 1..N; -crash.seed=S runs
// only S. Every failure names its seed and the command that replays it.

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

var (
	crashSeeds = flag.Int("crash.seeds", envInt("WEIR_CRASH_SEEDS", 50), "number of seeds TestCrashRecovery and TestWALErrorInjection run (env WEIR_CRASH_SEEDS)")
	crashSeed  = flag.Int64("crash.seed", 0, "if non-zero, run only this seed of TestCrashRecovery and TestWALErrorInjection")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// seeds returns the seeds to run: -crash.seed alone, or 1..n.
func seeds(n int) []uint64 {
	if *crashSeed != 0 {
		return []uint64{uint64(*crashSeed)}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// replay formats the failure suffix naming the seed and its replay command.
func replay(test string, seed uint64) string {
	return fmt.Sprintf("[seed %d; replay: go test ./store/pebble -run '^%s$' -crash.seed=%d -v]", seed, test, seed)
}

// seeded fails tests with the seed and replay command attached.
type seeded struct {
	*testing.T
	suffix string
}

func (s seeded) Fatalf(format string, args ...any) {
	s.T.Helper()
	s.T.Fatalf(format+"\n"+s.suffix, args...)
}

func (s seeded) Errorf(format string, args ...any) {
	s.T.Helper()
	s.T.Errorf(format+"\n"+s.suffix, args...)
}

// Tables written by the crash and error-injection workloads.
const (
	wlRowsA   store.Table = "crash_a"
	wlRowsB   store.Table = "crash_b"
	wlScratch store.Table = "crash_scratch"
)

// workload describes the deterministic content of committer w's i-th txn.
type workload struct{ seed uint64 }

func (wl workload) hash(w, i, r int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d/%d", wl.seed, w, i, r)
	return h.Sum64()
}

// rows is how many rows txn (w, i) puts into crash_a / crash_b.
func (wl workload) rows(w, i int) int { return 1 + int(wl.hash(w, i, -1)%8) }

func rowKey2(w, i, r int) string { return fmt.Sprintf("%02d/%06d/%02d", w, i, r) }

func (wl workload) value(w, i, r int) string {
	n := int(wl.hash(w, i, r) % 300)
	return fmt.Sprintf("seed=%d w=%d i=%d r=%d ", wl.seed, w, i, r) + strings.Repeat("x", n)
}

// txn builds committer w's i-th txn: its rows alternate between two tables,
// and in the scratch table it adds its own key and range-deletes every
// earlier key of w, so the scratch table holds w's last applied txn only.
func (wl workload) txn(lease store.LeaseID, w, i int) *store.Txn {
	txn := store.NewTxn(lease)
	for r := range wl.rows(w, i) {
		tb := wlRowsA
		if r%2 == 1 {
			tb = wlRowsB
		}
		txn.Put(tb, []byte(rowKey2(w, i, r)), []byte(wl.value(w, i, r)))
	}
	txn.DeleteRange(wlScratch, fmt.Appendf(nil, "%02d/", w), fmt.Appendf(nil, "%02d/%06d", w, i))
	txn.Put(wlScratch, fmt.Appendf(nil, "%02d/%06d", w, i), []byte("latest"))
	return txn
}

// verify checks the recovered content against what was acknowledged:
// acked[w] is the number of w's commits acknowledged (its commits 0..n-1),
// attempted[w] the number it started. Commits acked[w] .. attempted[w]-1 are
// uncertain. With prefix, the present commits of w must form a prefix of its
// sequence. It returns, per committer, how many commits are present.
func (wl workload) verify(t seeded, s *Store, acked, attempted []int, prefix bool) []int {
	t.Helper()
	type txnID struct{ w, i int }
	count := map[txnID]int{}
	for _, tb := range []store.Table{wlRowsA, wlRowsB} {
		err := s.Scan(t.Context(), store.Range{Table: tb}, func(k, v []byte) bool {
			var w, i, r int
			if _, err := fmt.Sscanf(string(k), "%d/%d/%d", &w, &i, &r); err != nil {
				t.Errorf("%s: unparsable key %q", tb, k)
				return true
			}
			if want := wl.value(w, i, r); string(v) != want {
				t.Errorf("%s: row %q = %.40q..., want %.40q...", tb, k, v, want)
			}
			count[txnID{w, i}]++
			return true
		})
		if err != nil {
			t.Fatalf("scan %s: %v", tb, err)
		}
	}
	present := make([]int, len(acked))
	for w := range acked {
		last := -1
		for i := 0; i < attempted[w]; i++ {
			n, want := count[txnID{w, i}], wl.rows(w, i)
			delete(count, txnID{w, i})
			switch {
			case n == want:
				if prefix && last != i-1 {
					t.Errorf("committer %d: txn %d present but txn %d is absent", w, i, last+1)
				}
				last = i
			case n == 0:
				if i < acked[w] {
					t.Errorf("committer %d: acknowledged txn %d is absent", w, i)
				}
			default:
				t.Errorf("committer %d: txn %d is torn: %d of its %d rows present", w, i, n, want)
			}
		}
		present[w] = last + 1
		// The scratch table holds exactly the last present txn's key.
		var keys []string
		err := s.Scan(t.Context(), store.Range{Table: wlScratch, Lo: fmt.Appendf(nil, "%02d/", w), Hi: fmt.Appendf(nil, "%02d0", w)},
			func(k, v []byte) bool { keys = append(keys, string(k)); return true })
		if err != nil {
			t.Fatalf("scan scratch: %v", err)
		}
		if prefix {
			var want []string
			if last >= 0 {
				want = []string{fmt.Sprintf("%02d/%06d", w, last)}
			}
			if fmt.Sprint(keys) != fmt.Sprint(want) {
				t.Errorf("committer %d: scratch keys %q, want %q", w, keys, want)
			}
		}
	}
	for id, n := range count {
		t.Errorf("rows of a txn never attempted: committer %d txn %d (%d rows)", id.w, id.i, n)
	}
	return present
}

func TestCrashRecovery(t *testing.T) {
	for _, seed := range seeds(*crashSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runCrash(seeded{t, replay("TestCrashRecovery", seed)}, seed)
		})
	}
}

func crashOptions(fs vfs.FS, clk clock.Clock) Options {
	// Small memtables so that flushes (sstables, MANIFEST edits, WAL
	// recycling) happen during the workload and are crashed into too.
	return Options{
		FS:               wrapFS(fs, errorfs.InjectorFunc(yieldOnSync)),
		Clock:            clk,
		Logger:           quietLogger,
		MemTableSize:     256 << 10,
		TimestampReserve: 2 * time.Second,
	}
}

// yieldOnSync lets other goroutines run at every sync. An in-memory sync is
// instant, so without it one committer tends to run alone; with it,
// committers queue behind each other's syncs and share them, as they do on a
// disk, and the crash often catches a group commit in flight.
func yieldOnSync(op errorfs.Op) error {
	if slices.Contains(walSyncOps, op.Kind) {
		runtime.Gosched()
	}
	return nil
}

func runCrash(t seeded, seed uint64) {
	const committers, rounds = 4, 2
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	wl := workload{seed: seed}
	clk := clock.NewManual(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	fs := vfs.NewCrashableMem()
	s, err := Open("db", crashOptions(fs, clk))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// next[w] is committer w's next txn number; it carries across rounds.
	next := make([]int, committers)
	var maxTS store.Timestamp
	var oldLeases []store.LeaseID
	for round := range rounds {
		lease, err := s.CreateLease(t.Context(), time.Hour)
		if err != nil {
			t.Fatalf("round %d: CreateLease: %v", round, err)
		}
		for _, old := range oldLeases {
			if lease <= old {
				t.Errorf("round %d: new lease %v not above %v of an earlier incarnation", round, lease, old)
			}
		}
		oldLeases = append(oldLeases, lease)

		var (
			mu        sync.Mutex
			acked     = make([]int, committers) // w's commits 0..acked-1 were acknowledged
			attempted = make([]int, committers)
			issuedTS  store.Timestamp // highest Timestamp returned
			total     atomic.Int64
			stop      atomic.Bool
			wg        sync.WaitGroup
		)
		copy(acked, next)
		copy(attempted, next)
		crashAfter := int64(rng.IntN(250))
		reached := make(chan struct{})
		var reachedOnce sync.Once
		if crashAfter == 0 {
			reachedOnce.Do(func() { close(reached) })
		}
		for w := range committers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next[w]; !stop.Load(); i++ {
					if w == 0 && i%20 == 0 {
						clk.Advance(time.Second)
					}
					ts, err := s.Timestamp(t.Context())
					if err != nil {
						t.Errorf("Timestamp: %v", err)
						return
					}
					mu.Lock()
					issuedTS = max(issuedTS, ts)
					attempted[w] = i + 1
					mu.Unlock()
					if err := s.Commit(t.Context(), wl.txn(lease, w, i)); err != nil {
						t.Errorf("committer %d txn %d: %v", w, i, err)
						return
					}
					mu.Lock()
					acked[w] = i + 1
					mu.Unlock()
					if total.Add(1) == crashAfter {
						reachedOnce.Do(func() { close(reached) })
					}
				}
			}()
		}
		allDone := make(chan struct{})
		go func() { wg.Wait(); close(allDone) }()
		select {
		case <-reached:
		case <-allDone:
		}

		// Power loss. What was acknowledged before this point must survive.
		mu.Lock()
		ackedAtCrash := append([]int(nil), acked...)
		tsAtCrash := issuedTS
		mu.Unlock()
		cfg := vfs.CrashCloneCfg{}
		if p := []int{0, 0, 10, 50, 90, 100}[rng.IntN(6)]; p > 0 {
			cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: p, RNG: rng}
		}
		crashed := fs.CrashClone(cfg)

		stop.Store(true)
		<-allDone
		if t.Failed() {
			return
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close of the pre-crash store: %v", round, err)
		}
		mu.Lock()
		attemptedAll := append([]int(nil), attempted...)
		mu.Unlock()

		// Restart on the crashed filesystem, possibly with the clock behind.
		fs = crashed
		if rng.IntN(2) == 0 {
			clk.Set(clk.Now().Add(-time.Hour))
		}
		s, err = Open("db", crashOptions(fs, clk))
		if err != nil {
			t.Fatalf("round %d: Open after crash (unsynced kept %d%%): %v", round, cfg.UnsyncedDataPercent, err)
		}
		present := wl.verify(t, s, ackedAtCrash, attemptedAll, true)
		if t.Failed() {
			t.Fatalf("round %d: crash after %d commits (unsynced kept %d%%): acked %v, attempted %v, present %v",
				round, crashAfter, cfg.UnsyncedDataPercent, ackedAtCrash, attemptedAll, present)
		}
		t.Logf("round %d: crash after %d commits, unsynced kept %d%%: acked %v, attempted %v, present %v",
			round, crashAfter, cfg.UnsyncedDataPercent, ackedAtCrash, attemptedAll, present)
		// The next round continues after the last present txn; txns lost in
		// the crash are written again with the same content.
		copy(next, present)
		maxTS = max(maxTS, tsAtCrash)
		ts, err := s.Timestamp(t.Context())
		if err != nil {
			t.Fatalf("round %d: Timestamp after crash: %v", round, err)
		}
		if ts <= maxTS {
			t.Fatalf("round %d: Timestamp %d after the crash is not above %d, issued before it", round, ts, maxTS)
		}
		for _, old := range oldLeases {
			if st, err := s.LeaseState(t.Context(), old); err != nil || st == store.LeaseActive {
				t.Fatalf("round %d: lease %v of an earlier incarnation: %v, %v", round, old, st, err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
