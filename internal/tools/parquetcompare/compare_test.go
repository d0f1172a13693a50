// Package parquetcompare measures parquet-go against arrow-go on the
// conversion weir needs: map rows (weir.Row) to a Parquet file and back.
package parquetcompare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pq "github.com/parquet-go/parquet-go"
)

const nRows = 200000

// rows: the shape weir hands a sink: map rows with key string, count int64, i int64, note string.
func rows() []map[string]any {
	out := make([]map[string]any, nRows)
	for i := range out {
		out[i] = map[string]any{"key": fmt.Sprintf("k%05d", i%5000), "count": int64(i/5000 + 1), "i": int64(i), "note": "some payload text " + fmt.Sprint(i%97)}
	}
	return out
}

var cols = []string{"count", "i", "key", "note"} // sorted, as parquet-go's Group orders them

func pqSchema() *pq.Schema {
	return pq.NewSchema("row", pq.Group{
		"key": pq.Optional(pq.String()), "count": pq.Optional(pq.Int(64)),
		"i": pq.Optional(pq.Int(64)), "note": pq.Optional(pq.String()),
	})
}

func writePQ(path string, rs []map[string]any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := pq.NewWriter(f, pqSchema(), pq.Compression(&pq.Snappy))
	buf := make([]pq.Row, 0, 1024)
	flush := func() error { _, err := w.WriteRows(buf); buf = buf[:0]; return err }
	for _, r := range rs {
		row := make(pq.Row, len(cols))
		for ci, c := range cols {
			v := r[c]
			if v == nil {
				row[ci] = pq.Value{}.Level(0, 0, ci)
				continue
			}
			switch x := v.(type) {
			case string:
				row[ci] = pq.ByteArrayValue([]byte(x)).Level(0, 1, ci)
			case int64:
				row[ci] = pq.Int64Value(x).Level(0, 1, ci)
			}
		}
		buf = append(buf, row)
		if len(buf) == cap(buf) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

func readPQ(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := pq.OpenFile(f, st.Size())
	if err != nil {
		return 0, err
	}
	names := make([]string, 0)
	for _, c := range pf.Schema().Columns() {
		names = append(names, c[0])
	}
	n := 0
	buf := make([]pq.Row, 1024)
	for _, rg := range pf.RowGroups() {
		rr := rg.Rows()
		for {
			k, err := rr.ReadRows(buf)
			for _, row := range buf[:k] {
				m := make(map[string]any, len(names))
				for _, v := range row {
					if v.IsNull() {
						m[names[v.Column()]] = nil
						continue
					}
					switch v.Kind() {
					case pq.ByteArray:
						m[names[v.Column()]] = string(v.ByteArray())
					case pq.Int64:
						m[names[v.Column()]] = v.Int64()
					}
				}
				n++
				_ = m
			}
			if err != nil {
				break
			}
		}
		rr.Close()
	}
	return n, nil
}

func arSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "count", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

func writeAR(path string, rs []map[string]any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	sc := arSchema()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	flush := func() error {
		rec := b.NewRecordBatch()
		defer rec.Release()
		return fw.WriteBuffered(rec)
	}
	for i, r := range rs {
		for ci, c := range cols {
			v := r[c]
			fb := b.Field(ci)
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch x := v.(type) {
			case string:
				fb.(*array.StringBuilder).Append(x)
			case int64:
				fb.(*array.Int64Builder).Append(x)
			}
		}
		if (i+1)%65536 == 0 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return fw.Close()
}

func readAR(path string) (int, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return 0, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1024}, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	n := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		names := make([]string, rec.NumCols())
		for i := range names {
			names[i] = rec.ColumnName(i)
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			m := make(map[string]any, len(names))
			for ci := range names {
				col := rec.Column(ci)
				if col.IsNull(r) {
					m[names[ci]] = nil
					continue
				}
				switch a := col.(type) {
				case *array.String:
					m[names[ci]] = a.Value(r)
				case *array.Int64:
					m[names[ci]] = a.Value(r)
				}
			}
			n++
			_ = m
		}
	}
	return n, rr.Err()
}

func BenchmarkWrite(b *testing.B) {
	rs := rows()
	dir := b.TempDir()
	for name, fn := range map[string]func(string, []map[string]any) error{"parquet-go": writePQ, "arrow-go": writeAR} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := fn(filepath.Join(dir, name+".parquet"), rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(nRows*b.N)/b.Elapsed().Seconds(), "rows/s")
			st, _ := os.Stat(filepath.Join(dir, name+".parquet"))
			b.ReportMetric(float64(st.Size()), "file-bytes")
		})
	}
}

func BenchmarkRead(b *testing.B) {
	rs := rows()
	dir := b.TempDir()
	p := filepath.Join(dir, "in.parquet")
	if err := writePQ(p, rs); err != nil {
		b.Fatal(err)
	}
	p2 := filepath.Join(dir, "in2.parquet")
	if err := writeAR(p2, rs); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fn   func(string) (int, error)
		file string
	}{{"parquet-go/own-file", readPQ, p}, {"parquet-go/arrow-file", readPQ, p2}, {"arrow-go/own-file", readAR, p2}, {"arrow-go/pqgo-file", readAR, p}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				n, err := tc.fn(tc.file)
				if err != nil || n != nRows {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(nRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
