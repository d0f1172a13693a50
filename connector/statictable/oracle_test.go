package statictable_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
)

// inputRow is a row of the test input tables.
type inputRow struct {
	Key string `parquet:"key"`
	I   int64  `parquet:"i"`
}

// countRow is a row the Counter pipeline writes.
type countRow struct {
	Key   string `parquet:"key"`
	Count int64  `parquet:"count"`
}

// writeInput writes tables Parquet tables of rows rows each (keys chosen
// with seed over keys keys) into dir, named by consecutive hours from
// 2024-01-01, written to a temporary name and renamed (tables appear
// whole). It returns the expected count per key.
func writeInput(t testing.TB, dir string, tables, rows, keys int, seed uint64) map[string]int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 11))
	want := map[string]int{}
	i := int64(0)
	for tb := 0; tb < tables; tb++ {
		var rs []inputRow
		for j := 0; j < rows; j++ {
			k := fmt.Sprintf("k%03d", r.IntN(keys))
			want[k]++
			rs = append(rs, inputRow{Key: k, I: i})
			i++
		}
		name := time.Date(2024, 1, 1, tb, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05Z") + ".parquet"
		writeParquetFile(t, filepath.Join(dir, name), rs)
	}
	return want
}

func writeParquetFile[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	w := pq.NewGenericWriter[T](f, pq.MaxRowsPerRowGroup(500))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// readOutput is the oracle's reader: it reads the output directory's
// progress manifest and every table it lists with parquet-go (not with the
// package's own reader), and returns each key's counts, sorted.
func readOutput(t testing.TB, dir string) map[string][]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "_weir_manifest.json"))
	if err != nil {
		t.Fatalf("output manifest: %v", err)
	}
	var m struct {
		Tables []struct {
			Name string `json:"name"`
			Rows int64  `json:"rows"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, tb := range m.Tables {
		rows, err := pq.ReadFile[countRow](filepath.Join(dir, tb.Name))
		if err != nil {
			t.Fatalf("output table %s: %v", tb.Name, err)
		}
		if int64(len(rows)) != tb.Rows {
			t.Errorf("output table %s has %d rows, the manifest says %d", tb.Name, len(rows), tb.Rows)
		}
		for _, r := range rows {
			got[r.Key] = append(got[r.Key], r.Count)
		}
	}
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return got
}

// checkExact is the exactly-once oracle: every key's counts are 1..n,
// each once.
func checkExact(t testing.TB, got map[string][]int64, want map[string]int) {
	t.Helper()
	bad := 0
	for k, n := range want {
		c := got[k]
		ok := len(c) == n
		for i := 0; ok && i < n; i++ {
			ok = c[i] == int64(i+1)
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("key %s: want counts 1..%d once each, got %d values %v", k, n, len(c), summarize(c))
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("output has %d keys, input %d", len(got), len(want))
	}
	if bad > 5 {
		t.Errorf("... %d keys wrong in all", bad)
	}
}

func summarize(c []int64) string {
	if len(c) <= 12 {
		return fmt.Sprint(c)
	}
	return fmt.Sprintf("%v ... %v", c[:6], c[len(c)-6:])
}
