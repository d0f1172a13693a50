package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"
)

// TestBenchParquetRows: the Parquet rows run at a small size through
// 'weir bench --one' — the pipeline completes and its output passes the
// manifest check (every input row counted), the floor reads every row —
// and the --quick rows stay small.
func TestBenchParquetRows(t *testing.T) {
	for _, c := range parquetBenchCases(3000, true) {
		t.Run(c.Kind, func(t *testing.T) {
			b, _ := json.Marshal(c)
			var out, errb bytes.Buffer
			if code := Main([]string{"bench", "--one", string(b)}, Options{Stdout: &out, Stderr: &errb}); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var r benchResult
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if r.Err != "" || r.MsgsPerSec <= 0 || r.CPUScope != "run" {
				t.Fatalf("result %+v", r)
			}
		})
	}
	for _, c := range parquetBenchCases(20000, true) {
		if c.Messages != 20000 {
			t.Fatalf("--quick row %q has %d rows", c.Name, c.Messages)
		}
	}
	if cs := parquetBenchCases(300000, false); cs[0].Messages != parquetInputRows {
		t.Fatalf("the default size is %d rows, want %d", cs[0].Messages, parquetInputRows)
	}
	if !strings.HasPrefix(parquetRow, "parquet") || !strings.HasPrefix(parquetFloorRow, "parquet") {
		t.Fatal("--rows parquet must select both rows")
	}
}

// TestCheckParquetOutput: the Parquet row's output check passes an output
// that counted every input row once, and refuses one whose manifest
// disagrees with its tables, one with a row twice and one whose counts
// are not the input's (each case breaks only the check it names).
func TestCheckParquetOutput(t *testing.T) {
	type table struct {
		listed int64 // the rows the manifest lists
		rows   []countRow
	}
	output := func(tables ...table) string {
		dir := t.TempDir()
		var m []string
		for i, tb := range tables {
			name := fmt.Sprintf("t%d.parquet", i)
			if err := pq.WriteFile(filepath.Join(dir, name), tb.rows); err != nil {
				t.Fatal(err)
			}
			m = append(m, fmt.Sprintf(`{"name": %q, "rows": %d}`, name, tb.listed))
		}
		b := `{"tables": [` + strings.Join(m, ", ") + `]}`
		if err := os.WriteFile(filepath.Join(dir, "_weir_manifest.json"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a1, a2, b1 := countRow{Key: "a", Count: 1}, countRow{Key: "a", Count: 2}, countRow{Key: "b", Count: 1}
	want := map[string]int64{"a": 2, "b": 1}
	if err := checkParquetOutput(output(table{2, []countRow{a1, b1}}, table{1, []countRow{a2}}), want); err != nil {
		t.Fatalf("a right output refused: %v", err)
	}
	for name, dir := range map[string]string{
		"manifest":  output(table{1, []countRow{a1, b1}}, table{2, []countRow{a2}}),
		"row twice": output(table{2, []countRow{a1, b1}}, table{2, []countRow{a2, a2}}),
		"counts":    output(table{2, []countRow{a1, b1}}, table{1, []countRow{a1}}),
	} {
		if err := checkParquetOutput(dir, want); err == nil {
			t.Errorf("%s: a wrong output passed", name)
		}
	}
}
