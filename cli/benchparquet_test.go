package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
