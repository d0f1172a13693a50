package statictable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

func openStore(t *testing.T) store.Store {
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newTestSource(t *testing.T, st store.Store, params map[string]any) *Source {
	t.Helper()
	s, err := NewSource(connector.SourceParams{SourceID: "in", Path: "computations.Reader.source_streams.in", Parameters: params, Store: st}, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readKeys reads partition key of s from from to the end and returns the
// "k" column of each row and the next offset.
func readKeys(t *testing.T, s *Source, key string, from connector.Offset, maxRows int) ([]string, connector.Offset, error) {
	t.Helper()
	ctx := context.Background()
	p, err := s.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out []string
	last := uint64(0)
	for {
		b, err := p.Read(ctx, from, maxRows, 1<<20)
		if err != nil {
			return out, from, err
		}
		for _, r := range b.Records {
			if uint64(r.WriteTimestamp) <= last {
				t.Fatalf("write timestamps do not increase: %d after %d", r.WriteTimestamp, last)
			}
			last = uint64(r.WriteTimestamp)
			out = append(out, fmt.Sprint(r.Row["k"]))
		}
		if len(b.Records) == 0 {
			return out, from, nil
		}
		from = b.Next
		if maxRows == 1 {
			return out, from, nil
		}
	}
}

// TestSourceOrder: tables are read in the order of the times in their
// names, whatever the listing order; files that are not tables are
// ignored; a table that arrives later with an earlier time is read after
// the ones already cataloged; offsets survive a new Source (a restart).
func TestSourceOrder(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	writeFile(t, dir, "2024-01-02T00:00:00Z.jsonl", `{"k":"c1"}`+"\n\n"+`{"k":"c2"}`)
	writeFile(t, dir, "2024-01-01.ndjson", `{"k":"a1"}`+"\n")
	writeFile(t, dir, "2024-01-01T12:00:00+02:00.jsonl", `{"k":"b1"}`+"\n")
	writeFile(t, dir, "README.txt", "not a table")
	writeFile(t, dir, "_weir_manifest.lock", "")
	writeFile(t, dir, ".tmp-2024-01-03.jsonl", `{"k":"x"}`)
	writeFile(t, dir, "notes.jsonl", `{"k":"x"}`)
	s := newTestSource(t, st, map[string]any{"directory": dir})
	keys, err := s.Partitions(context.Background())
	if err != nil || len(keys) != 1 {
		t.Fatalf("Partitions = %v, %v", keys, err)
	}
	got, next, err := readKeys(t, s, keys[0], 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a1 b1 c1 c2"; strings.Join(got, " ") != want {
		t.Fatalf("read %v, want %s", got, want)
	}
	// A late table, and a restart: a new Source over the same store.
	writeFile(t, dir, "2023-12-31T00:00:00Z.jsonl", `{"k":"late"}`+"\n")
	s2 := newTestSource(t, st, map[string]any{"directory": dir})
	if _, err := s2.Partitions(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _, err = readKeys(t, s2, keys[0], next, 100)
	if err != nil || strings.Join(got, " ") != "late" {
		t.Fatalf("after the restart read %v (%v), want only the late table", got, err)
	}
}

// TestSourceChangedTable: a table changed after a partition read part of
// it is an error naming it when its partition opens it again (a restart);
// it is never read again silently. The listing does not fail (issue 23
// item 10): tables that appear after it are cataloged and the other
// partition reads them; the changed table's partition stops at it.
func TestSourceChangedTable(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	params := map[string]any{"directory": dir, "partition_count": 2}
	writeFile(t, dir, "2024-01-01.jsonl", `{"k":"a"}`+"\n"+`{"k":"b"}`+"\n")
	writeFile(t, dir, "2024-01-02.jsonl", `{"k":"p1"}`+"\n")
	s := newTestSource(t, st, params)
	keys, _ := s.Partitions(context.Background())
	got, next, err := readKeys(t, s, keys[0], 0, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("read %v %v", got, err)
	}
	name := filepath.Join(dir, "2024-01-01.jsonl")
	for i, body := range []string{`{"k":"a"}` + "\n" + `{"k":"B"}` + "\n", `{"k":"a"}` + "\n"} {
		writeFile(t, dir, "2024-01-01.jsonl", body)
		s2 := newTestSource(t, st, params)
		_, _, err = readKeys(t, s2, keys[0], next, 10)
		if err == nil || !strings.Contains(err.Error(), "table "+name+" changed after it was read") {
			t.Fatalf("read of a changed table: %v", err)
		}
		// A new table for each partition: the listing catalogs them.
		writeFile(t, dir, fmt.Sprintf("2024-01-0%d.jsonl", 3+2*i), fmt.Sprintf(`{"k":"n%d"}`+"\n", 2*i))
		writeFile(t, dir, fmt.Sprintf("2024-01-0%d.jsonl", 4+2*i), fmt.Sprintf(`{"k":"n%d"}`+"\n", 2*i+1))
		if _, err := s2.Partitions(context.Background()); err != nil {
			t.Fatalf("listing with a changed table: %v", err)
		}
		other, _, err := readKeys(t, s2, keys[1], 0, 10)
		if want := map[int]string{0: "p1 n1", 1: "p1 n1 n3"}[i]; err != nil || strings.Join(other, " ") != want {
			t.Fatalf("the other partition read %v (%v), want %s", other, err, want)
		}
		if _, _, err = readKeys(t, s2, keys[0], next, 10); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("read past a changed table: %v", err)
		}
	}
}

// TestSourceTouchedTable: a table whose modification time changed but
// whose bytes did not (a touch, a copy of the same bytes) is the table
// that was read (issue 23 item 10): after a restart the listing succeeds,
// records the new modification time, and the partition reads on.
func TestSourceTouchedTable(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	params := map[string]any{"directory": dir}
	body := `{"k":"a"}` + "\n" + `{"k":"b"}` + "\n" + `{"k":"c"}` + "\n"
	writeFile(t, dir, "2024-01-01.jsonl", body)
	s := newTestSource(t, st, params)
	keys, _ := s.Partitions(context.Background())
	_, next, err := readKeys(t, s, keys[0], 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "2024-01-01.jsonl")
	later := time.Now().Add(time.Hour)
	for _, step := range []struct {
		name   string
		change func()
		want   string
	}{
		{"touch", func() {
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}, "b"},
		{"copy-same-bytes", func() {
			tmp := filepath.Join(dir, ".copy")
			writeFile(t, dir, ".copy", body)
			later = later.Add(time.Hour)
			if err := os.Chtimes(tmp, later, later); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}, "c"},
	} {
		step.change()
		// The partition opens it before the listing sees it: the open
		// decides by the checksum too.
		s2 := newTestSource(t, st, params)
		var got []string
		got, next, err = readKeys(t, s2, keys[0], next, 1)
		if err != nil || strings.Join(got, " ") != step.want {
			t.Fatalf("%s: read %v (%v), want %s", step.name, got, err, step.want)
		}
		if _, err := s2.Partitions(context.Background()); err != nil {
			t.Fatalf("%s: listing: %v", step.name, err)
		}
		e, _, err := s2.cat.get(context.Background(), 0)
		if err != nil || e.ModTime.Unix() != later.Unix() {
			t.Fatalf("%s: cataloged modification time %v (%v), want %v", step.name, e.ModTime, err, later)
		}
	}
}

// TestSourceMalformed: a malformed JSON Lines line and a truncated
// Parquet file are errors naming the file (and the line).
func TestSourceMalformed(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	writeFile(t, dir, "2024-01-01.jsonl", `{"k":"a"}`+"\n"+`{"k": oops}`+"\n")
	writeFile(t, dir, "2024-01-02.parquet", "PAR1 truncated")
	s := newTestSource(t, st, map[string]any{"directory": dir})
	keys, _ := s.Partitions(context.Background())
	_, next, err := readKeys(t, s, keys[0], 0, 10)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "2024-01-01.jsonl")) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed line: %v", err)
	}
	_ = next
	// Skip the bad table by replacing it before any row was committed past
	// it: the Parquet table fails next.
	writeFile(t, dir, "2024-01-01.jsonl", `{"k":"a"}`+"\n")
	_, _, err = readKeys(t, newTestSource(t, st, map[string]any{"directory": dir}), keys[0], position{Ordinal: 1}.offset(), 10)
	if err == nil || !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), filepath.Join(dir, "2024-01-02.parquet")) {
		t.Fatalf("truncated Parquet: %v", err)
	}
}

// TestSourcePartitions: tables are spread over partitions by ordinal, and
// partition_count cannot change under an existing catalog.
func TestSourcePartitions(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	for i := 0; i < 5; i++ {
		writeFile(t, dir, fmt.Sprintf("2024-01-0%d.jsonl", i+1), fmt.Sprintf(`{"k":"t%d"}`+"\n", i))
	}
	s := newTestSource(t, st, map[string]any{"directory": dir, "partition_count": 2})
	keys, err := s.Partitions(context.Background())
	if err != nil || len(keys) != 2 {
		t.Fatal(keys, err)
	}
	a, _, _ := readKeys(t, s, keys[0], 0, 10)
	b, _, _ := readKeys(t, s, keys[1], 0, 10)
	if strings.Join(a, " ") != "t0 t2 t4" || strings.Join(b, " ") != "t1 t3" {
		t.Fatalf("partition 0 read %v, partition 1 %v", a, b)
	}
	s3 := newTestSource(t, st, map[string]any{"directory": dir, "partition_count": 3})
	if _, err := s3.Partitions(context.Background()); err == nil || !strings.Contains(err.Error(), "partition_count") {
		t.Fatalf("changed partition_count: %v", err)
	}
}

// TestParamErrors: bad parameters are errors naming the field.
func TestParamErrors(t *testing.T) {
	for _, tc := range []struct {
		sink   bool
		params map[string]any
		want   string
	}{
		{false, map[string]any{}, "p.directory"},
		{false, map[string]any{"directory": "d", "table_name_pattern": "("}, "p.table_name_pattern"},
		{false, map[string]any{"directory": "d", "partition_count": 0}, "p.partition_count"},
		{true, map[string]any{"output_directory": "d"}, "p.table_ttl"},
		{true, map[string]any{"output_directory": "d", "table_ttl": "48h", "table_period": "1s"}, "table_ttl / table_period must be at most 40000"},
		{true, map[string]any{"output_directory": "d", "table_ttl": "1h", "table_period": "1500ms"}, "p.table_period"},
		{true, map[string]any{"output_directory": "d", "table_ttl": "1h", "format": "csv"}, "p.format"},
		{true, map[string]any{"output_directory": "d", "table_ttl": "1h", "columns": []any{map[string]any{"name": "a", "type": "int"}}}, "p.columns[0].type"},
		{true, map[string]any{"output_directory": "d", "table_ttl": "1h", "max_row_count": 0}, "p.max_row_count"},
	} {
		var err error
		if tc.sink {
			_, err = ParseSinkParams("p", tc.params)
		} else {
			_, err = ParseSourceParams("p", tc.params)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.params, err, tc.want)
		}
	}
}

// TestSkipTable: a table the partition cannot read stops it; SkipTable
// marks it skipped in the store (by path, then again by bare name: already
// skipped), and a new life of the source reads on with the next table, none
// of the skipped table's rows from the committed position on, with write
// timestamps still increasing (issue 23 item 11).
func TestSkipTable(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	params := map[string]any{"directory": dir}
	writeFile(t, dir, "2024-01-01.jsonl", `{"k":"a"}`+"\n")
	writeFile(t, dir, "2024-01-02.jsonl", `{"k":"b1"}`+"\n"+`{"k": oops}`+"\n"+`{"k":"b3"}`+"\n")
	writeFile(t, dir, "2024-01-03.jsonl", `{"k":"c"}`+"\n")
	s := newTestSource(t, st, params)
	keys, _ := s.Partitions(context.Background())
	got, next, err := readKeys(t, s, keys[0], 0, 10)
	bad := filepath.Join(dir, "2024-01-02.jsonl")
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Join(got, " ") != "a" {
		t.Fatalf("read %v, %v; want a and an error naming %s", got, err, bad)
	}
	if _, err := SkipTable(context.Background(), st, filepath.Join(dir, "nope.jsonl")); err == nil || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Fatalf("skip of an unknown table: %v", err)
	}
	sk, err := SkipTable(context.Background(), st, bad)
	if err != nil || len(sk) != 1 || sk[0].File != bad || sk[0].Already || !sk[0].Opened || sk[0].Ordinal != 1 {
		t.Fatalf("SkipTable = %+v, %v", sk, err)
	}
	if sk, err = SkipTable(context.Background(), st, "2024-01-02.jsonl"); err != nil || len(sk) != 1 || !sk[0].Already {
		t.Fatalf("second SkipTable = %+v, %v", sk, err)
	}
	// The skipped table may now change or go: it is not checked.
	writeFile(t, dir, "2024-01-02.jsonl", "")
	s2 := newTestSource(t, st, params)
	if _, err := s2.Partitions(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _, err = readKeys(t, s2, keys[0], next, 10)
	if err != nil || strings.Join(got, " ") != "c" {
		t.Fatalf("after the skip read %v (%v), want c", got, err)
	}
}

// TestSourceColumns (issue 23 item 11): with columns declared, a row whose
// value does not fit its column, or that has an undeclared column, stops
// the partition with an error naming the table, the row and the column;
// skipping the table lets the partition go on. A bad declaration is an
// error naming the field.
func TestSourceColumns(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t)
	params := map[string]any{"directory": dir, "columns": []any{
		map[string]any{"name": "k", "type": "string"},
		map[string]any{"name": "n", "type": "int64"},
	}}
	writeFile(t, dir, "2024-01-01.jsonl", `{"k":"a","n":1}`+"\n"+`{"k":"b"}`+"\n")
	writeFile(t, dir, "2024-01-02.jsonl", `{"k":"c","n":2}`+"\n"+`{"k":"d","n":"three"}`+"\n")
	writeFile(t, dir, "2024-01-03.jsonl", `{"k":"e","n":4,"x":true}`+"\n")
	writeFile(t, dir, "2024-01-04.jsonl", `{"k":"f","n":5}`+"\n")
	s := newTestSource(t, st, params)
	keys, _ := s.Partitions(context.Background())
	got, next, err := readKeys(t, s, keys[0], 0, 10)
	bad := filepath.Join(dir, "2024-01-02.jsonl")
	if err == nil || !strings.Contains(err.Error(), "table "+bad+": row 1: ") || !strings.Contains(err.Error(), `column "n" (declared int64)`) || strings.Join(got, " ") != "a b" {
		t.Fatalf("read %v, %v; want a b, then an error naming %s, row 1 and column n", got, err, bad)
	}
	if _, err := SkipTable(context.Background(), st, bad); err != nil {
		t.Fatal(err)
	}
	got, next, err = readKeys(t, newTestSource(t, st, params), keys[0], next, 10)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "2024-01-03.jsonl")+": row 0: ") || !strings.Contains(err.Error(), `column "x" is not declared`) || len(got) != 0 {
		t.Fatalf("read %v, %v; want an error naming the undeclared column x", got, err)
	}
	if _, err := SkipTable(context.Background(), st, "2024-01-03.jsonl"); err != nil {
		t.Fatal(err)
	}
	if got, _, err = readKeys(t, newTestSource(t, st, params), keys[0], next, 10); err != nil || strings.Join(got, " ") != "f" {
		t.Fatalf("after the skips read %v (%v), want f", got, err)
	}
	_, err = NewSource(connector.SourceParams{SourceID: "in", Path: "p", Parameters: map[string]any{"directory": dir, "columns": []any{map[string]any{"name": "k", "type": "text"}}}, Store: st}, Options{})
	if err == nil || !strings.Contains(err.Error(), "p.parameters.columns[0].type") {
		t.Fatalf("bad column type: %v", err)
	}
}
