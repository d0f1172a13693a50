package cli

// The Parquet rows of 'weir bench' (issue 24's Parquet pipeline): the
// static-table example (StaticTableSource → Reader, a SwiftMap hop →
// Counter, a Transform grouped by key → ArrivalOrderTableSink) over one
// zstd Parquet file of the bench's ~100-byte events over 10,000 keys, and
// its floor, the same file read by the source's table reader alone
// (statictable.ScanTable, no engine). The input file is written with
// parquet-go before the clock starts; the pipeline's output is checked
// through the sink's manifest after it stops.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/statictable"
)

// The Parquet rows' names.
const (
	parquetRow      = "parquet: StaticTableSource → Counter → ArrivalOrderTableSink"
	parquetFloorRow = "parquet floor: the source's reader alone"
)

// parquetInputRows is the input size, the Parquet rows' default.
const parquetInputRows = 1_000_000

// parquetBenchCases are the Parquet rows for a bench run of n messages a
// row: the 1,000,000 rows at the default size (n = 300,000, the
// default of --messages), else n rows (--messages N, --quick).
func parquetBenchCases(n int, quick bool) []benchCase {
	if !quick && n == 300000 {
		n = parquetInputRows
	}
	return []benchCase{
		{Name: parquetFloorRow, Kind: "parquet-floor", Messages: n},
		{Name: parquetRow, Kind: "parquet", Example: "static-table", Messages: n},
	}
}

// parquetEvent is a bench event (benchRow) as a Parquet row.
type parquetEvent struct {
	Key  string `parquet:"key"`
	Page string `parquet:"page"`
	Ms   int64  `parquet:"ms"`
	Ref  string `parquet:"ref"`
}

// parquetRowGroup is the input's row group size: DuckDB's default
// (122,880) rounded to a power of two.
const parquetRowGroup = 128 * 1024

// writeParquetInput writes the n bench events as one zstd Parquet table in
// dir, named by an ISO 8601 time as the source wants, written under a
// hidden name and renamed. It returns the table's path and the number of
// events per key.
func writeParquetInput(dir string, n int) (string, map[string]int64, error) {
	tmp := filepath.Join(dir, ".input.parquet")
	f, err := os.Create(tmp)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	w := pq.NewGenericWriter[parquetEvent](f, pq.Compression(&pq.Zstd), pq.MaxRowsPerRowGroup(parquetRowGroup))
	r := rand.New(rand.NewPCG(1, 1))
	want := map[string]int64{}
	buf := make([]parquetEvent, 0, 10000)
	for i := 0; i < n; i++ {
		row := benchRow(r, i)
		e := parquetEvent{Key: row["key"].(string), Page: row["page"].(string), Ms: row["ms"].(int64), Ref: row["ref"].(string)}
		want[e.Key]++
		buf = append(buf, e)
		if len(buf) == cap(buf) || i == n-1 {
			if _, err := w.Write(buf); err != nil {
				return "", nil, err
			}
			buf = buf[:0]
		}
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "2025-06-01T00:00:00Z.parquet")
	return path, want, os.Rename(tmp, path)
}

// benchParquet runs the static-table example over the generated table,
// from the engine's start to the pipeline's completion, and checks that
// the sink's published tables hold one count row per input row (the
// manifest's row counts) and that each key's largest count is its number
// of input rows (the tables read with parquet-go).
func benchParquet(o *Options, dir string, c benchCase, res *benchResult) error {
	tables, err := os.MkdirTemp("", "weir-bench-parquet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tables)
	in, out := filepath.Join(tables, "input"), filepath.Join(tables, "output")
	if err := os.Mkdir(in, 0o755); err != nil {
		return err
	}
	_, want, err := writeParquetInput(in, c.Messages)
	if err != nil {
		return err
	}
	p, err := benchSpec(c)
	if err != nil {
		return err
	}
	p.Computations["Reader"].SourceStreams["events"].Parameters["directory"] = in
	p.Computations["Counter"].Sinks["out"].Parameters["output_directory"] = out
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := benchRunEngine(o, st, p, c.Messages, res); err != nil {
		return err
	}
	return checkParquetOutput(out, want)
}

// checkParquetOutput checks an output directory of the static-table
// example through its manifest: the published tables hold one count row
// per input row, and each key's largest count is its number of input rows
// (want), read with parquet-go rather than with the connector's reader.
func checkParquetOutput(dir string, want map[string]int64) error {
	b, err := os.ReadFile(filepath.Join(dir, "_weir_manifest.json"))
	if err != nil {
		return err
	}
	var m struct {
		Tables []struct {
			Name string `json:"name"`
			Rows int64  `json:"rows"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	var n, total int64
	for _, k := range want {
		n += k
	}
	got := map[string]int64{}
	for _, t := range m.Tables {
		total += t.Rows
		rows, err := pq.ReadFile[countRow](filepath.Join(dir, t.Name))
		if err != nil {
			return fmt.Errorf("output table %s: %w", t.Name, err)
		}
		if int64(len(rows)) != t.Rows {
			return fmt.Errorf("output table %s holds %d rows, the manifest says %d", t.Name, len(rows), t.Rows)
		}
		for _, r := range rows {
			got[r.Key] = max(got[r.Key], r.Count)
		}
	}
	if total != n {
		return fmt.Errorf("the output manifest lists %d rows in %d tables, want %d", total, len(m.Tables), n)
	}
	for k, c := range want {
		if got[k] != c {
			return fmt.Errorf("key %q: counted %d, want %d", k, got[k], c)
		}
	}
	return nil
}

// countRow is a row of the static-table example's output.
type countRow struct {
	Key   string `parquet:"key,optional"`
	Count int64  `parquet:"count,optional"`
}

// benchParquetFloor reads the generated table with the source's table
// reader alone (statictable.ScanTable): decoding into rows, no engine.
func benchParquetFloor(dir string, c benchCase, res *benchResult) error {
	path, _, err := writeParquetInput(dir, c.Messages)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	keys := 0
	clk := startBenchClock()
	n, err := statictable.ScanTable(path, func(rows []weir.Row) error {
		for _, r := range rows {
			if _, ok := r["key"].(string); ok {
				keys++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	clk.stop(res, c.Messages)
	if n != int64(c.Messages) || keys != c.Messages {
		return fmt.Errorf("read %d rows (%d with a key), want %d", n, keys, c.Messages)
	}
	return nil
}
