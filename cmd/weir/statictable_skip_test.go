package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-stream/weir/connector/statictable/tabletest"
)

// nestedRow is an input row with a nested column, which StaticTableSource
// refuses.
type nestedRow struct {
	Key string `parquet:"key"`
	I   int64  `parquet:"i"`
	N   struct {
		A int64 `parquet:"a"`
	} `parquet:"n"`
}

// TestStaticTableSkip (issue 23 item 11): a table whose schema weir
// refuses (a nested column) stops the pipeline with an error naming the
// file and the column; 'weir statictable skip' records the skip in the
// store (a second skip says so), and the same 'weir run' then completes
// with exactly the other tables' rows — none of the skipped table's.
func TestStaticTableSkip(t *testing.T) {
	f := newStaticFixture(t, 3, 800, 30, 9)
	// Read between the fixture's first two tables (hours 0 and 1).
	name := filepath.Join(f.in, "2024-01-01T00:30:00Z.parquet")
	var rows []nestedRow
	for i := range 50 {
		rows = append(rows, nestedRow{Key: fmt.Sprintf("skipped%02d", i%5), I: int64(i)})
	}
	tabletest.WriteParquetFile(t, name, rows)
	r := startStaticRun(t, f, nil)
	r.waitFor(t, "table "+name+": ")
	r.waitFor(t, `column "n" is a struct`)
	r.stop(t)

	out := weir(t, "", "statictable", "skip", "--data", f.data, name)
	if !strings.Contains(out, "skipped table "+name) {
		t.Fatalf("weir statictable skip printed %q", out)
	}
	if out := weir(t, "", "statictable", "skip", "--data", f.data, filepath.Base(name)); !strings.Contains(out, "already skipped") {
		t.Fatalf("second skip printed %q", out)
	}
	weir(t, "", "run", "--data", f.data, "--spec", f.spec, "--progress", "0")
	f.check(t)
}
