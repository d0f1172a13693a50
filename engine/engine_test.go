package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/countoracle"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// example loads a spec from examples/.
func example(t *testing.T, name string) *spec.Pipeline {
	t.Helper()
	path := filepath.Join("..", "examples", name, "spec.yson")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse(b, path)
	if err != nil {
		t.Fatal(err)
	}
	// Test-sized timings: a short lease check keeps idle epochs cheap.
	p.Dynamic.SchedulerPeriod = spec.Duration(20 * time.Millisecond)
	// Injected crashes restart quickly (the backoff's doubling still shows).
	p.Dynamic.JobRestartBackoff = spec.Duration(10 * time.Millisecond)
	p.Dynamic.JobRestartBackoffMax = spec.Duration(100 * time.Millisecond)
	for _, c := range p.Computations {
		c.EmptyBatchBackoff = spec.Duration(5 * time.Millisecond)
	}
	return p
}

type fixture struct {
	st     store.Store
	events *queue.Queue
	counts *queue.Queue
	want   map[string]int
	logs   []string
	mu     sync.Mutex
}

func newFixture(t *testing.T, parts int) *fixture {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	f := &fixture{st: st, want: map[string]int{}}
	if f.events, err = queue.Create(ctx, st, "events", parts); err != nil {
		t.Fatal(err)
	}
	if f.counts, err = queue.Create(ctx, st, "counts", 2); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fixture) writeKeys(t *testing.T, n, keys int, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([]weir.Row, n)
	parts := make([]int, n)
	for i := range rows {
		k := fmt.Sprintf("k%02d", r.IntN(keys))
		rows[i] = weir.Row{"key": k}
		parts[i] = r.IntN(f.events.Partitions())
		f.want[k]++
	}
	if err := f.events.Write(context.Background(), rows, parts); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) run(t *testing.T, p *spec.Pipeline, hooks job.Hooks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := New(ctx, Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	state, err := e.Run(ctx)
	if err != nil || state != controller.Completed {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("run ended in %s: %v\n%s", state, err, strings.Join(f.logs[max(0, len(f.logs)-30):], "\n"))
	}
}

// counts reads the output queue: per key, the sorted counts.
func (f *fixture) readCounts(t *testing.T) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for p := 0; p < f.counts.Partitions(); p++ {
		rows, err := f.counts.Read(context.Background(), p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got[r.Row["key"].(string)] = append(got[r.Row["key"].(string)], r.Row["count"].(int64))
		}
	}
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return got
}

func (f *fixture) checkExactlyOnce(t *testing.T) {
	t.Helper()
	got := f.readCounts(t)
	for _, bad := range countoracle.Violations(got, f.want) {
		t.Error(bad)
	}
}

// TestExamplesExactlyOnce runs the counter examples (sync and async queue
// sinks) end to end through the engine, with crashes at every named point,
// and checks each key's counts are exactly 1..n once each.
func TestExamplesExactlyOnce(t *testing.T) {
	for _, name := range []string{"counter", "counter-async"} {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crashes=%v", name, crash), func(t *testing.T) {
				f := newFixture(t, 3)
				f.writeKeys(t, 3000, 50, 1)
				var hooks job.Hooks
				var crashes *enginetest.Crashes
				if crash {
					crashes = enginetest.NewCrashes(7, 0.05, 30)
					hooks = crashes
				}
				f.run(t, example(t, name), hooks)
				f.checkExactlyOnce(t)
				if crashes != nil {
					if crashes.Total() == 0 {
						t.Fatal("no crash injected")
					}
					t.Logf("crashes %v", crashes.Injected)
				}
			})
		}
	}
}

// TestExampleWordCount counts words through Tokenize (SwiftMap).
func TestExampleWordCount(t *testing.T) {
	f := newFixture(t, 2)
	r := rand.New(rand.NewPCG(3, 3))
	var rows []weir.Row
	var parts []int
	for i := 0; i < 500; i++ {
		var words []string
		for j := 0; j < 1+r.IntN(6); j++ {
			w := fmt.Sprintf("w%d", r.IntN(30))
			words = append(words, w)
			f.want[w]++
		}
		rows = append(rows, weir.Row{"text": strings.Join(words, " ")})
		parts = append(parts, i%2)
	}
	if err := f.events.Write(context.Background(), rows, parts); err != nil {
		t.Fatal(err)
	}
	f.run(t, example(t, "wordcount"), enginetest.NewCrashes(11, 0.05, 20))
	f.checkExactlyOnce(t)
}

// TestExampleAtLeastOnce: counter-alo never loses a count.
func TestExampleAtLeastOnce(t *testing.T) {
	f := newFixture(t, 3)
	f.writeKeys(t, 2000, 30, 2)
	f.run(t, example(t, "counter-alo"), enginetest.NewCrashes(5, 0.1, 30, job.CrashAfterCommitBeforeAck))
	got := f.readCounts(t)
	extra := 0
	for k, n := range f.want {
		seen := map[int64]bool{}
		for _, c := range got[k] {
			seen[c] = true
		}
		for i := 1; i <= n; i++ {
			if !seen[int64(i)] {
				t.Errorf("key %s: count %d missing", k, i)
			}
		}
		extra += len(got[k]) - n
	}
	t.Logf("%d outputs beyond the exact count (at-least-once duplicates)", extra)
}

// TestAtMostOnceSinkDrops: an AsyncQueueSink with at_most_once_strategy and
// a tiny byte limit drops messages and says so in the log.
func TestAtMostOnceSinkDrops(t *testing.T) {
	f := newFixture(t, 2)
	f.writeKeys(t, 2000, 20, 4)
	p := example(t, "counter-async")
	p.Computations["Counter"].Sinks["out"].AtMostOnceStrategy = &spec.AtMostOnceStrategy{
		Enabled: true, TotalQueueBytesLimit: 100, SuspendDestructionDuration: spec.Duration(time.Second),
	}
	f.run(t, p, nil)
	total := 0
	for _, c := range f.readCounts(t) {
		total += len(c)
	}
	if total == 0 || total >= 2000 {
		t.Errorf("at-most-once sink wrote %d of 2000 rows; want some but not all with a 100-byte limit", total)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	dropped := false
	for _, l := range f.logs {
		if strings.Contains(l, "dropped") {
			dropped = true
		}
	}
	if !dropped {
		t.Error("no log line reports dropped messages")
	}
	t.Logf("at-most-once sink delivered %d of 2000", total)
}
