// Package tabletest holds the test fixtures of the static table
// connectors, shared by their package tests and the weir command's
// end-to-end tests: input tables written with parquet-go, and the
// exactly-once oracle, which reads an output directory's manifest and
// tables with parquet-go (never with the connector's own reader).
package tabletest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weir-stream/weir/internal/countoracle"
)

// InputRow is a row of the test input tables.
type InputRow struct {
	Key string `parquet:"key"`
	I   int64  `parquet:"i"`
}

// CountRow is a row the Counter pipeline writes.
type CountRow struct {
	Key   string `parquet:"key"`
	Count int64  `parquet:"count"`
}

// WriteInput writes tables Parquet tables of rows rows each (keys chosen
// with seed over keys keys) into dir, named by consecutive hours from
// 2024-01-01, written to a temporary name and renamed (tables appear
// whole). It returns the expected count per key.
func WriteInput(t testing.TB, dir string, tables, rows, keys int, seed uint64) map[string]int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 11))
	want := map[string]int{}
	i := int64(0)
	for tb := 0; tb < tables; tb++ {
		var rs []InputRow
		for j := 0; j < rows; j++ {
			k := fmt.Sprintf("k%03d", r.IntN(keys))
			want[k]++
			rs = append(rs, InputRow{Key: k, I: i})
			i++
		}
		name := time.Date(2024, 1, 1, tb, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05Z") + ".parquet"
		WriteParquetFile(t, filepath.Join(dir, name), rs)
	}
	return want
}

// WriteParquetFile writes rows as a Parquet file at path, through a
// hidden temporary name and a rename.
func WriteParquetFile[T any](t testing.TB, path string, rows []T) {
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

// ReadOutput is the oracle's reader: it reads the output directory's
// progress manifest and every table it lists with parquet-go (not with the
// package's own reader), and returns each key's counts, sorted.
func ReadOutput(t testing.TB, dir string) map[string][]int64 {
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
		rows, err := pq.ReadFile[CountRow](filepath.Join(dir, tb.Name))
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
	countoracle.Sort(got)
	return got
}

// CheckExact is the exactly-once oracle: every key's counts are 1..n,
// each once.
func CheckExact(t testing.TB, got map[string][]int64, want map[string]int) {
	t.Helper()
	if err := Exact(got, want); err != nil {
		t.Error(err)
	}
}

// Exact returns nil if every key's counts in got (sorted, as ReadOutput
// returns them) are exactly 1..n, each once, with n from want
// (countoracle.Violations); otherwise an error describing the first keys
// that are not.
func Exact(got map[string][]int64, want map[string]int) error {
	bad := countoracle.Violations(got, want)
	if len(bad) == 0 {
		return nil
	}
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("... %d problems in all", len(bad)))
	}
	return errors.New(strings.Join(bad, "\n"))
}
