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

// pipelineSpec: in → Counter → out. sinkParams are added to the sink's
// parameters.
func pipelineSpec(in, out string, sourceParts int, sinkParams string) string {
	return fmt.Sprintf(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "empty_batch_backoff" = 5;
        "max_rows_per_batch" = 200;
        "source_streams" = {
            "rows" = {
                "source_class_name" = "StaticTableSource";
                "parameters" = {"directory" = %q; "finite" = %%true; "partition_count" = %d};
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
        "sinks" = {
            "out" = {
                "sink_class_name" = "ArrivalOrderTableSink";
                "input_stream_ids" = ["counts"];
                "parameters" = {
                    "output_directory" = %q;
                    "table_period" = "1s";
                    "table_ttl" = "1h";
                    "close_delay" = 50;
                    %s
                };
            };
        };
    };
};
"streams" = {"words" = {}; "counts" = {}};
"dynamic_spec" = {"scheduler_period" = 20; "job_restart_backoff" = 10; "job_restart_backoff_max" = 100};
`, in, sourceParts, out, sinkParams)
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
	p, err := spec.Parse([]byte(specText), "test.yson")
	if err != nil {
		t.Fatal(err)
	}
	st, err := pstore.Open(storeDir, pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := &logs{}
	conns := connector.NewRegistry()
	if err := statictable.RegisterWith(conns, statictable.Options{Logf: l.logf}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: engine.DefaultClasses(), Connectors: conns, Logf: l.logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	state, err := e.Run(ctx)
	if err != nil || state != controller.Completed {
		t.Fatalf("run ended in %s: %v\n%s", state, err, l.tail())
	}
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
			runEngine(t, t.TempDir(), pipelineSpec(in, out, tc.parts, `"max_row_count" = 500;`), hooks)
			if crashes != nil {
				t.Logf("crashes injected: %v", crashes.Injected)
			}
			tabletest.CheckExact(t, tabletest.ReadOutput(t, out), want)
		})
	}
}
