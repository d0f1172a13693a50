package statictable

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weir-stream/weir"
)

// pagedRow is a row of TestParquetReaderPagesAndSeeks's table.
type pagedRow struct {
	Key  string  `parquet:"key"`
	Opt  *string `parquet:"opt,optional"`
	N    int64   `parquet:"n"`
	Blob []byte  `parquet:"blob"`
}

// TestParquetReaderPagesAndSeeks: the column-wise reader returns every row
// as parquet-go's own row reader sees it, whatever the chunk size, from any
// row it is positioned at — across row groups of 700 rows and pages of a
// few hundred bytes, so that a chunk's byte-array values span pages whose
// buffers parquet-go reuses once released, with plain and dictionary
// strings and nulls.
func TestParquetReaderPagesAndSeeks(t *testing.T) {
	const rows = 3000
	want := make([]weir.Row, rows)
	in := make([]pagedRow, rows)
	for i := range in {
		r := pagedRow{Key: fmt.Sprintf("key-%04d-%s", i, string(rune('a'+i%26))), N: int64(i) * 1_000_003, Blob: []byte(fmt.Sprintf("blob %d", i*7))}
		want[i] = weir.Row{"key": r.Key, "n": r.N, "blob": r.Blob, "opt": nil}
		if i%3 != 0 {
			s := fmt.Sprintf("opt-%d", i%5) // few distinct values: dictionary pages
			r.Opt = &s
			want[i]["opt"] = s
		}
		in[i] = r
	}
	path := filepath.Join(t.TempDir(), "t.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pq.NewGenericWriter[pagedRow](f, pq.MaxRowsPerRowGroup(700), pq.PageBufferSize(256), pq.Compression(&pq.Zstd))
	if _, err := w.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	r, err := openParquet(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Rows() != rows {
		t.Fatalf("%d rows, want %d", r.Rows(), rows)
	}
	for _, chunk := range []int{1, 7, 256, 1000} {
		for _, from := range []int64{0, 1, 699, 700, 1234, rows - 1, rows} {
			if err := r.SeekRow(from); err != nil {
				t.Fatal(err)
			}
			buf, sizes := make([]weir.Row, chunk), make([]int, chunk)
			var got []weir.Row
			for {
				n, err := r.Next(buf, sizes)
				for i := 0; i < n; i++ {
					if sizes[i] != rowWeight(buf[i]) {
						t.Fatalf("chunk %d from %d: row %d weighs %d, reported %d", chunk, from, int(from)+len(got)+i, rowWeight(buf[i]), sizes[i])
					}
				}
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("chunk %d from %d: %v", chunk, from, err)
				}
			}
			if len(got) != rows-int(from) {
				t.Fatalf("chunk %d from %d: %d rows, want %d", chunk, from, len(got), rows-int(from))
			}
			for i, g := range got {
				if !reflect.DeepEqual(g, want[int(from)+i]) {
					t.Fatalf("chunk %d from %d: row %d is %v, want %v", chunk, from, int(from)+i, g, want[int(from)+i])
				}
			}
		}
	}
}
