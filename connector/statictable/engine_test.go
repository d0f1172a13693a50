package statictable_test

// Tests through engine.New: a directory of Parquet tables → Reader
// (SwiftPassthrough over StaticTableSource) → Counter (grouped by "key")
// → ArrivalOrderTableSink, with jobs crashed at random; the oracle reads
// the output directory with parquet-go.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/statictable"
	"github.com/weir-stream/weir/connector/statictable/tabletest"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/spec"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// shortSlots makes the sink's slots short, so that tables close by the
// wall clock while a test runs.
const shortSlots = `"table_period" = "1s"; "close_delay" = 50;`

// pipelineSpec: in → Counter → out. sinkParams are added to the sink's
// parameters, counterParams to the Counter's; finite is the source's.
func pipelineSpec(in, out string, sourceParts int, sinkParams string) string {
	return pipelineSpecWith(in, out, sourceParts, true, "", sinkParams)
}

func pipelineSpecWith(in, out string, sourceParts int, finite bool, counterParams, sinkParams string) string {
	return fmt.Sprintf(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "empty_batch_backoff" = 5;
        "max_rows_per_batch" = 200;
        "source_streams" = {
            "rows" = {
                "source_class_name" = "StaticTableSource";
                "parameters" = {"directory" = %q; "finite" = %%%v; "partition_count" = %d};
            };
        };
        "output_stream_ids" = ["words"];
    };
    "Counter" = {
        "computation_class_name" = "Counter";
        "group_by" = ["key"];
        "partition_count" = 2;
        "max_rows_per_batch" = 200;
        "empty_batch_backoff" = 5;
        "input_stream_ids" = ["words"];
        "output_stream_ids" = ["counts"];
        %s
        "sinks" = {
            "out" = {
                "sink_class_name" = "ArrivalOrderTableSink";
                "input_stream_ids" = ["counts"];
                "parameters" = {
                    "output_directory" = %q;
                    "table_ttl" = "1h";
                    %s
                };
            };
        };
    };
};
"streams" = {"words" = {}; "counts" = {}};
"dynamic_spec" = {"scheduler_period" = 20; "job_restart_backoff" = 10; "job_restart_backoff_max" = 100};
`, in, finite, sourceParts, counterParams, out, sinkParams)
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "\n")
	return s[max(0, len(s)-6000):]
}

// runEngine runs specText on a store in storeDir until it completes.
func runEngine(t testing.TB, storeDir, specText string, hooks job.Hooks) {
	t.Helper()
	runEngineWithin(t, 90*time.Second, storeDir, specText, hooks)
}

// runEngineWithin is runEngine, failing the test unless the pipeline
// completes within d.
func runEngineWithin(t testing.TB, d time.Duration, storeDir, specText string, hooks job.Hooks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	e, l := newEngine(t, ctx, storeDir, specText, hooks)
	start := time.Now()
	state, err := e.Run(ctx)
	if err != nil || state != controller.Completed {
		t.Fatalf("run ended in %s after %v: %v\n%s", state, time.Since(start).Round(time.Millisecond), err, l.tail())
	}
}

// newEngine builds an engine for specText on a store in storeDir (closed
// at the end of the test), with the package's connectors logging to the
// returned logs.
func newEngine(t testing.TB, ctx context.Context, storeDir, specText string, hooks job.Hooks) (*engine.Engine, *logs) {
	t.Helper()
	p, err := spec.Parse([]byte(specText), "test.yson")
	if err != nil {
		t.Fatal(err)
	}
	st, err := pstore.Open(storeDir, pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := &logs{}
	conns := connector.NewRegistry()
	if err := statictable.RegisterWith(conns, statictable.Options{Logf: l.logf}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: engine.DefaultClasses(), Connectors: conns, Logf: l.logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return e, l
}

// TestEngineExactlyOnce: Parquet tables through the Counter pipeline into
// Parquet output tables, with the source split over partitions and
// jobs crashed at random at every epoch crash point: each key's counts are
// exactly 1..n in the output tables.
func TestEngineExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts int
		crash float64
	}{{"one-partition", 1, 0}, {"three-partitions-crashes", 3, 0.05}} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := tabletest.WriteInput(t, in, 6, 700, 40, 1)
			var hooks job.Hooks
			var crashes *enginetest.Crashes
			if tc.crash > 0 {
				crashes = enginetest.NewCrashes(7, tc.crash, 25)
				hooks = crashes
			}
			runEngine(t, t.TempDir(), pipelineSpec(in, out, tc.parts, shortSlots+`"max_row_count" = 500;`), hooks)
			if crashes != nil {
				t.Logf("crashes injected: %v", crashes.Injected)
			}
			tabletest.CheckExact(t, tabletest.ReadOutput(t, out), want)
		})
	}
}

// TestEngineFlushesOpenTable: with the sink's default table_period (1h)
// and max_row_count (1,000,000), a finite pipeline completes in seconds
// with every row in a published table — the open table is published when
// the Counter's input is finished, not at the top of the hour — also when
// the Counter's outbox limit is below max_row_count (its outbox fills
// before the input ends: the sink publishes what it holds, the outputs
// leave the outbox, and the input goes on).
func TestEngineFlushesOpenTable(t *testing.T) {
	for _, tc := range []struct{ name, counter string }{
		{"end-of-input", ""},
		{"outbox-limit-below-max-row-count", `"output_store_count_limit" = 300;`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := tabletest.WriteInput(t, in, 6, 700, 40, 1)
			runEngineWithin(t, 20*time.Second, t.TempDir(), pipelineSpecWith(in, out, 2, true, tc.counter, ""), nil)
			tabletest.CheckExact(t, tabletest.ReadOutput(t, out), want)
		})
	}
}

// TestEngineDrainPublishes: an infinite pipeline (the source waits for
// new tables) with the default table_period of 1h is stopped once the
// Counter has processed every input row: the drain publishes the open
// tables and the pipeline stops within seconds with every row in the
// manifest.
func TestEngineDrainPublishes(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := tabletest.WriteInput(t, in, 3, 500, 30, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, l := newEngine(t, ctx, t.TempDir(), pipelineSpecWith(in, out, 2, false, "", ""), nil)
	type result struct {
		state controller.State
		err   error
	}
	done := make(chan result, 1)
	go func() {
		st, err := e.Run(ctx)
		done <- result{st, err}
	}()
	for e.Board().Counters()["Counter"].Inputs < 3*500 {
		select {
		case r := <-done:
			t.Fatalf("run ended in %s before the input was processed: %v\n%s", r.state, r.err, l.tail())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := e.Controller().SetTarget(controller.Stopped); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case r := <-done:
		if r.err != nil || r.state != controller.Stopped {
			t.Fatalf("run ended in %s: %v\n%s", r.state, r.err, l.tail())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the drain did not finish within 15s\n%s", l.tail())
	}
	t.Logf("drained in %v", time.Since(start).Round(time.Millisecond))
	tabletest.CheckExact(t, tabletest.ReadOutput(t, out), want)
}
