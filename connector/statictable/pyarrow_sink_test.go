package statictable_test

// ArrivalOrderTableSink's output read by a reader nobody on this project
// wrote: pyarrow (see tabletest.Pyarrow). A pipeline runs through
// engine.New with jobs crashed at random, and read_output.py reads the
// output directory as a reader must — through _weir_manifest.json, every
// listed table with pyarrow.parquet. It proves that the tables are
// Parquet pyarrow reads, that the manifest's row counts are the tables',
// and that every row written is there exactly once: for tables pyarrow
// wrote of every type (read by StaticTableSource, copied by a Transform),
// each row with the values pyarrow reads in the input; for the Counter
// pipeline, each key's counts 1..n once each, as parquet-go reads them.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weir-stream/weir/connector/statictable/tabletest"
	"github.com/weir-stream/weir/internal/enginetest"
)

// copySpec: StaticTableSource over in → Reader (SwiftPassthrough) →
// Copier (Passthrough, a Transform grouped by "id", 2 partitions) →
// ArrivalOrderTableSink into out, at most 10 rows a table.
func copySpec(in, out string) string {
	return fmt.Sprintf(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "empty_batch_backoff" = 5;
        "max_rows_per_batch" = 7;
        "source_streams" = {
            "tables" = {
                "source_class_name" = "StaticTableSource";
                "parameters" = {"directory" = %q; "finite" = %%true; "partition_count" = 2};
            };
        };
        "output_stream_ids" = ["rows"];
    };
    "Copier" = {
        "computation_class_name" = "Passthrough";
        "group_by" = ["id"];
        "partition_count" = 2;
        "max_rows_per_batch" = 7;
        "empty_batch_backoff" = 5;
        "input_stream_ids" = ["rows"];
        "output_stream_ids" = ["copies"];
        "sinks" = {
            "out" = {
                "sink_class_name" = "ArrivalOrderTableSink";
                "input_stream_ids" = ["copies"];
                "parameters" = {
                    "output_directory" = %q;
                    "table_period" = "1s";
                    "table_ttl" = "1h";
                    "close_delay" = 50;
                    "max_row_count" = 10;
                    "compression" = "zstd";
                };
            };
        };
    };
};
"streams" = {"rows" = {}; "copies" = {}};
"dynamic_spec" = {"scheduler_period" = 20; "job_restart_backoff" = 10; "job_restart_backoff_max" = 100};
`, in, out)
}

// readOutputPyarrow runs read_output.py on an output directory; it checks
// that each table has the rows the manifest says.
func readOutputPyarrow(t *testing.T, dir string) []tabletest.PyTable {
	t.Helper()
	var out struct {
		Pyarrow string              `json:"pyarrow"`
		Tables  []tabletest.PyTable `json:"tables"`
	}
	if err := json.Unmarshal(tabletest.RunPyarrowScript(t, "read_output.py", dir), &out); err != nil {
		t.Fatal(err)
	}
	for _, tb := range out.Tables {
		if int64(len(tb.Rows)) != tb.ManifestRows {
			t.Errorf("output table %s: pyarrow %s reads %d rows, the manifest says %d", tb.Name, out.Pyarrow, len(tb.Rows), tb.ManifestRows)
		}
	}
	return out.Tables
}

// idOf is the id column of a row a script printed.
func idOf(t *testing.T, r map[string]json.RawMessage) string {
	t.Helper()
	v, err := tabletest.PyValue(r["id"])
	if id, ok := v.(int64); ok && err == nil {
		return fmt.Sprint(id)
	}
	t.Fatalf("row %v has no int64 id (%v)", r, err)
	return ""
}

// TestSinkOutputReadByPyarrow: see the file's header.
func TestSinkOutputReadByPyarrow(t *testing.T) {
	tabletest.Pyarrow(t)
	t.Run("types", func(t *testing.T) {
		in, out := t.TempDir(), t.TempDir()
		expectedPath := filepath.Join(t.TempDir(), "input.json")
		tabletest.RunPyarrowScript(t, "write_tables.py", "sink-input", in, expectedPath)
		b, err := os.ReadFile(expectedPath)
		if err != nil {
			t.Fatal(err)
		}
		var input struct {
			Tables []tabletest.PyTable `json:"tables"`
		}
		if err := json.Unmarshal(b, &input); err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]json.RawMessage{} // by id
		for _, tb := range input.Tables {
			for _, r := range tb.Rows {
				want[idOf(t, r)] = r
			}
		}

		crashes := enginetest.NewCrashes(3, 0.05, 25)
		runEngine(t, t.TempDir(), copySpec(in, out), crashes)
		t.Logf("crashes injected: %v", crashes.Injected)

		tables := readOutputPyarrow(t, out)
		seen := map[string]int{}
		bad := 0
		for _, tb := range tables {
			for _, r := range tb.Rows {
				id := idOf(t, r)
				seen[id]++
				w, ok := want[id]
				if !ok {
					t.Errorf("output table %s: row with id %s was never written", tb.Name, id)
					continue
				}
				if seen[id] > 1 {
					continue
				}
				got := map[string]any{}
				for col, raw := range r {
					v, err := tabletest.PyValue(raw)
					if err != nil {
						t.Fatal(err)
					}
					got[col] = v
				}
				if diffs := tabletest.CheckRow(got, w); len(diffs) > 0 && bad < 3 {
					bad++
					t.Errorf("output table %s, id %s, as pyarrow reads it:\n  %s", tb.Name, id, strings.Join(diffs, "\n  "))
				}
			}
		}
		var dup, missing []string
		for id := range want {
			switch n := seen[id]; {
			case n == 0:
				missing = append(missing, id)
			case n > 1:
				dup = append(dup, fmt.Sprintf("%s×%d", id, n))
			}
		}
		sort.Strings(dup)
		sort.Strings(missing)
		if len(dup)+len(missing) > 0 {
			t.Errorf("not exactly once: ids missing %v, duplicated %v", missing, dup)
		}
		if len(tables) < 2 {
			t.Errorf("%d output tables, want several (max_row_count = 10)", len(tables))
		}
		t.Logf("%d rows in %d output tables", len(want), len(tables))
	})

	t.Run("counter", func(t *testing.T) {
		in, out := t.TempDir(), t.TempDir()
		want := tabletest.WriteInput(t, in, 4, 300, 20, 5)
		crashes := enginetest.NewCrashes(9, 0.05, 25)
		runEngine(t, t.TempDir(), pipelineSpec(in, out, 2, shortSlots+`"max_row_count" = 200;`), crashes)
		t.Logf("crashes injected: %v", crashes.Injected)

		got := map[string][]int64{}
		for _, tb := range readOutputPyarrow(t, out) {
			for _, r := range tb.Rows {
				k, err1 := tabletest.PyValue(r["key"])
				c, err2 := tabletest.PyValue(r["count"])
				key, ok1 := k.(string)
				count, ok2 := c.(int64)
				if err1 != nil || err2 != nil || !ok1 || !ok2 || len(r) != 2 {
					t.Fatalf("output table %s: row %v is not {key: string, count: int64}", tb.Name, r)
				}
				got[key] = append(got[key], count)
			}
		}
		for _, c := range got {
			sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		}
		tabletest.CheckExact(t, got, want)
		if pg := tabletest.ReadOutput(t, out); fmt.Sprint(pg) != fmt.Sprint(got) {
			t.Errorf("pyarrow and parquet-go read different counts")
		}
	})
}
