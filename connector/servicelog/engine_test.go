package servicelog_test

// Tests through engine.New: ExternalCounter writes the key_counts table
// from a queue, and a ServiceLogSource cycles over it into Digest, whose
// rows go to the queue "digests"; the oracle (servicelogtest) checks each
// key once per cycle.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/servicelog/servicelogtest"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

const tableDecl = `"external_states" = {"key_counts" = {
    "key_columns" = [{"name" = "key_hash"; "type" = "uint64"}; {"name" = "key"; "type" = "string"}];
    "value_columns" = [{"name" = "count"; "type" = "int64"}];
}};`

// counterSpec: events (finite queue) → ExternalCounter writing key_counts.
const counterSpec = tableDecl + `
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough"; "empty_batch_backoff" = 5;
        "source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "consumer_path" = "users"; "finite" = %true}}};
        "output_stream_ids" = ["activity"];
    };
    "Users" = {
        "computation_class_name" = "ExternalCounter"; "group_by" = ["key"]; "empty_batch_backoff" = 5;
        "input_stream_ids" = ["activity"]; "external_state_managers" = ["key_counts"];
    };
};
"streams" = {"activity" = {}};
"dynamic_spec" = {"scheduler_period" = 20; "job_restart_backoff" = 10; "job_restart_backoff_max" = 100};
`

// logSpec: the counter over an infinite queue, and the service log with
// partitions over key_counts (finite: one cycle) into Digest → digests.
func logSpec(partitions int, finite bool, batch int) string {
	return tableDecl + fmt.Sprintf(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough"; "empty_batch_backoff" = 5;
        "source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "consumer_path" = "users"; "finite" = %%%v}}};
        "output_stream_ids" = ["activity"];
    };
    "Users" = {
        "computation_class_name" = "ExternalCounter"; "group_by" = ["key"]; "empty_batch_backoff" = 5;
        "input_stream_ids" = ["activity"]; "external_state_managers" = ["key_counts"];
    };
    "Digests" = {
        "computation_class_name" = "Digest"; "empty_batch_backoff" = 5; "max_rows_per_batch" = %d;
        "source_streams" = {"log" = {"source_class_name" = "ServiceLogSource";
            "parameters" = {"table" = "key_counts"; "partition_count" = %d; "finite" = %%%v;
                "min_cycle_duration" = 0; "cycle_end_marker" = %%true}}};
        "output_stream_ids" = ["digest"];
        "sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["digest"];
            "parameters" = {"queue_path" = "digests"}}};
    };
};
"streams" = {"activity" = {}; "digest" = {}};
"dynamic_spec" = {"scheduler_period" = 20; "job_restart_backoff" = 10; "job_restart_backoff_max" = 100};
`, finite, batch, partitions, finite)
}

type fixture struct {
	st     store.Store
	events *queue.Queue
	logs   []string
	mu     sync.Mutex
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	f := &fixture{st: st}
	if f.events, err = queue.Create(ctx, st, "events", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Create(ctx, st, "digests", 2); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fixture) tail() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := strings.Join(f.logs, "\n")
	return s[max(0, len(s)-6000):]
}

func (f *fixture) write(t *testing.T, rows ...weir.Row) {
	t.Helper()
	parts := make([]int, len(rows))
	for i := range parts {
		parts[i] = i % 2
	}
	if err := f.events.Write(context.Background(), rows, parts); err != nil {
		t.Fatal(err)
	}
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func events(ks []string, op string) []weir.Row {
	rows := make([]weir.Row, len(ks))
	for i, k := range ks {
		rows[i] = weir.Row{"key": k}
		if op != "" {
			rows[i]["op"] = op
		}
	}
	return rows
}

func (f *fixture) engine(t *testing.T, text string, hooks job.Hooks) *engine.Engine {
	t.Helper()
	p, err := spec.Parse([]byte(text), "test.yson")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Config{Spec: p, Store: f.st, Classes: engine.DefaultClasses(),
		Connectors: engine.DefaultConnectors(), Logf: f.logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// complete runs text until the pipeline completes.
func (f *fixture) complete(t *testing.T, text string, hooks job.Hooks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	state, err := f.engine(t, text, hooks).Run(ctx)
	if err != nil || state != controller.Completed {
		t.Fatalf("run ended in %s: %v\n%s", state, err, f.tail())
	}
}

func (f *fixture) digests(t *testing.T) []servicelogtest.Digest {
	t.Helper()
	ctx := context.Background()
	q, err := queue.Open(ctx, f.st, "digests")
	if err != nil {
		t.Fatal(err)
	}
	var out []servicelogtest.Digest
	for p := 0; p < q.Partitions(); p++ {
		rows, err := q.Read(ctx, p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			d, err := servicelogtest.FromRow(r.Row)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

func report(t *testing.T, res servicelogtest.Result) {
	t.Helper()
	for _, b := range res.Bad {
		t.Error(b)
	}
}

// TestFiniteCycleExactlyOnce: one cycle (finite) over a table of 300 keys
// in three partitions, batches of 7 rows, with jobs crashed at random at
// every epoch crash point: every key is emitted exactly once, with its
// final count, and every partition's cycle ends with a digest.
func TestFiniteCycleExactlyOnce(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashes=%v", crash), func(t *testing.T) {
			f := newFixture(t)
			stable := keys("k", 300)
			f.write(t, events(stable, "")...)
			f.write(t, events(stable[:50], "")...)
			f.complete(t, counterSpec, nil)
			var hooks job.Hooks
			var crashes *enginetest.Crashes
			if crash {
				crashes = enginetest.NewCrashes(5, 0.1, 40)
				hooks = crashes
			}
			f.complete(t, logSpec(3, true, 7), hooks)
			ds := f.digests(t)
			res := servicelogtest.Check(ds, 3, stable, nil)
			report(t, res)
			for p := 0; p < 3; p++ {
				if res.Completed[p] != 1 {
					t.Errorf("partition %d completed %d cycles, want 1 (finite)", p, res.Completed[p])
				}
			}
			for _, d := range ds {
				want := int64(1)
				if d.Key < stable[50] {
					want = 2
				}
				if !d.End && d.Count != want {
					t.Errorf("key %s emitted with count %d, want %d", d.Key, d.Count, want)
				}
			}
			if crashes != nil {
				if crashes.Total() == 0 {
					t.Fatal("no crash injected")
				}
				t.Logf("crashes %v", crashes.Injected)
			}
		})
	}
}

// TestCyclesWithChangesExactlyOnce: the service log cycles forever (no
// pause between cycles) while the counter adds new keys and deletes
// others, with jobs crashed at random: in every cycle each key is emitted
// at most once, and in every completed cycle each key that stayed in the
// table throughout exactly once.
func TestCyclesWithChangesExactlyOnce(t *testing.T) {
	f := newFixture(t)
	stable := keys("s", 120)
	doomed := keys("d", 60)
	f.write(t, events(append(append([]string{}, stable...), doomed...), "")...)
	f.complete(t, counterSpec, nil)

	crashes := enginetest.NewCrashes(11, 0.05, 60)
	e := f.engine(t, logSpec(2, false, 9), crashes)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		state, err := e.Run(ctx)
		if err == nil && state != controller.Stopped {
			err = fmt.Errorf("run ended in %s", state)
		}
		done <- err
	}()
	volatile := map[string]bool{}
	for _, k := range doomed {
		volatile[k] = true
	}
	r := rand.New(rand.NewPCG(3, 3))
	added := 0
	waitCycles := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			res := servicelogtest.Check(f.digests(t), 2, stable, volatile)
			if res.Completed[0] >= n && res.Completed[1] >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d cycles completed within 60s: %v\n%s", n, res.Completed, f.tail())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for round := 1; round <= 6; round++ {
		// Add a few keys and delete a few doomed ones, then let the cycles
		// go on while they are applied.
		var fresh []string
		for i := 0; i < 10; i++ {
			k := fmt.Sprintf("n%03d", added)
			added++
			volatile[k] = true
			fresh = append(fresh, k)
		}
		f.write(t, events(fresh, "")...)
		var del []string
		for i := 0; i < 8; i++ {
			del = append(del, doomed[r.IntN(len(doomed))])
		}
		f.write(t, events(del, "delete")...)
		waitCycles(round * 3)
	}
	if err := e.Controller().SetTarget(controller.Stopped); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, f.tail())
	}
	res := servicelogtest.Check(f.digests(t), 2, stable, volatile)
	report(t, res)
	if crashes.Total() == 0 {
		t.Fatal("no crash injected")
	}
	t.Logf("completed cycles %v; crashes %v", res.Completed, crashes.Injected)
}

// TestServiceLogRefusals: a table that is not declared, a first key column
// that is not a uint64 and a Swift reader are refused when the spec loads,
// with errors naming the field.
func TestServiceLogRefusals(t *testing.T) {
	f := newFixture(t)
	base := logSpec(2, true, 10)
	for _, tc := range []struct{ name, from, to, want string }{
		{"undeclared", `"table" = "key_counts"`, `"table" = "nope"`, `parameters.table: "nope" is not an external state table`},
		{"string-first-column", `[{"name" = "key_hash"; "type" = "uint64"}; {"name" = "key"; "type" = "string"}]`,
			`[{"name" = "key"; "type" = "string"}; {"name" = "key_hash"; "type" = "uint64"}]`, "must be a uint64 whose values are uniformly distributed"},
		{"swift-reader", `"computation_class_name" = "Digest"`, `"computation_class_name" = "SwiftPassthrough"`, "only a Transform may read"},
		{"bad-partitions", `"partition_count" = 2`, `"partition_count" = 0`, "partition_count: must be between 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(base, tc.from, tc.to, 1)
			if text == base {
				t.Fatalf("the replacement of %q changed nothing", tc.from)
			}
			p, err := spec.Parse([]byte(text), "test.yson")
			if err != nil {
				t.Fatal(err)
			}
			_, err = engine.New(context.Background(), engine.Config{Spec: p, Store: f.st, Classes: engine.DefaultClasses(), Connectors: engine.DefaultConnectors()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
