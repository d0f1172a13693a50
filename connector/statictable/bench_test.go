package statictable

// Figures: rows/s of StaticTableSource and ArrivalOrderTableSink on
// Parquet, side by side with reading and writing the same files with
// parquet-go alone. Run:
//
//	go test -run '^$' -bench 'Parquet' -benchtime 3x ./connector/statictable/

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

const (
	benchTables = 4
	benchRows   = 100_000 // per table
)

type benchRow struct {
	Key   string `parquet:"key,optional"`
	Count int64  `parquet:"count,optional"`
}

func benchInput(b *testing.B) string {
	dir := b.TempDir()
	for tb := 0; tb < benchTables; tb++ {
		rows := make([]benchRow, benchRows)
		for i := range rows {
			rows[i] = benchRow{Key: fmt.Sprintf("k%05d", i%5000), Count: int64(i)}
		}
		name := time.Date(2024, 1, 1, tb, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05Z") + ".parquet"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		w := pq.NewGenericWriter[benchRow](f)
		if _, err := w.Write(rows); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	return dir
}

// BenchmarkParquetRead: the same tables read by parquet-go alone (into
// structs, and into weir rows with the package's conversion) and by
// StaticTableSource (catalog, checksum pass, rows, offsets).
func BenchmarkParquetRead(b *testing.B) {
	dir := benchInput(b)
	names, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	total := float64(benchTables * benchRows)
	b.Run("library-structs", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			n := 0
			for _, name := range names {
				f, _ := os.Open(name)
				r := pq.NewGenericReader[benchRow](f)
				buf := make([]benchRow, 1000)
				for {
					k, err := r.Read(buf)
					n += k
					if err != nil {
						break
					}
				}
				r.Close()
				f.Close()
			}
			if n != benchTables*benchRows {
				b.Fatalf("read %d rows", n)
			}
		}
		b.ReportMetric(total*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("library-rows", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			n := 0
			for _, name := range names {
				f, _ := os.Open(name)
				fi, _ := f.Stat()
				r, err := openParquet(f, fi.Size())
				if err != nil {
					b.Fatal(err)
				}
				rows, err := readAll(r)
				if err != nil {
					b.Fatal(err)
				}
				n += len(rows)
				f.Close()
			}
			if n != benchTables*benchRows {
				b.Fatalf("read %d rows", n)
			}
		}
		b.ReportMetric(total*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("StaticTableSource", func(b *testing.B) {
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			st, err := pstore.Open(b.TempDir(), pstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			src, err := NewSource(connector.SourceParams{SourceID: "in", Path: "bench", Parameters: map[string]any{"directory": dir}, Store: st}, Options{Logf: b.Logf})
			if err != nil {
				b.Fatal(err)
			}
			keys, err := src.Partitions(ctx)
			if err != nil {
				b.Fatal(err)
			}
			part, err := src.Open(ctx, keys[0])
			if err != nil {
				b.Fatal(err)
			}
			n, from := 0, connector.Offset(0)
			for {
				bt, err := part.Read(ctx, from, 1000, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				n += len(bt.Records)
				if len(bt.Records) == 0 && bt.End {
					break
				}
				from = bt.Next
			}
			part.Close()
			b.StopTimer()
			st.Close()
			b.StartTimer()
			if n != benchTables*benchRows {
				b.Fatalf("read %d rows", n)
			}
		}
		b.ReportMetric(total*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkParquetWrite: the same rows written as tables of 100,000 rows
// by parquet-go alone (from structs; and from structs with an fsync per
// file, as the sink syncs) and by ArrivalOrderTableSink (from messages:
// schema from columns, temporary file, fsync, rename, manifest replace).
func BenchmarkParquetWrite(b *testing.B) {
	total := float64(benchTables * benchRows)
	rows := make([]benchRow, benchRows)
	for i := range rows {
		rows[i] = benchRow{Key: fmt.Sprintf("k%05d", i%5000), Count: int64(i)}
	}
	for _, sync := range []bool{false, true} {
		name := "library-structs"
		if sync {
			name += "-fsync"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			for i := 0; i < b.N; i++ {
				for tb := 0; tb < benchTables; tb++ {
					f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d.parquet", i, tb)))
					if err != nil {
						b.Fatal(err)
					}
					w := pq.NewGenericWriter[benchRow](f)
					if _, err := w.Write(rows); err != nil {
						b.Fatal(err)
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
					if sync {
						f.Sync()
					}
					f.Close()
				}
			}
			b.ReportMetric(total*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run("ArrivalOrderTableSink", func(b *testing.B) {
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			clk := clock.NewManual(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
			st, err := pstore.Open(b.TempDir(), pstore.Options{Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			ts, _ := st.Timestamp(ctx)
			msgs := make([]*weir.Message, benchTables*benchRows)
			for j := range msgs {
				r := rows[j%benchRows]
				msgs[j] = &weir.Message{ID: msgid.Ordered(uint64(ts), "counts", uint64(j)), SystemTimestamp: ts,
					Payload: weir.Row{"key": r.Key, "count": r.Count}}
			}
			sk, err := NewSink(connector.SinkParams{SinkID: "out", Path: "bench", Parameters: map[string]any{
				"output_directory": b.TempDir(), "table_ttl": "24h", "max_row_count": benchRows,
				"columns": []any{map[string]any{"name": "key", "type": "string"}, map[string]any{"name": "count", "type": "int64"}},
			}}, Options{Logf: b.Logf})
			if err != nil {
				b.Fatal(err)
			}
			var state []byte
			acked := 0
			sc := connector.SinkContext{Store: st, PartitionID: "Counter/0", SinkID: "out",
				LoadState: func(context.Context) ([]byte, error) { return state, nil },
				SaveState: func(_ *store.Txn, s []byte) { state = s }, Logf: b.Logf}
			b.StartTimer()
			if err := sk.Init(ctx, sc); err != nil {
				b.Fatal(err)
			}
			const epoch = 1000
			for j := 0; j < len(msgs) || acked < len(msgs) || sk.Queued() > 0; j += epoch {
				for _, m := range msgs[min(j, len(msgs)):min(j+epoch, len(msgs))] {
					sk.Distribute(m, func(error) { acked++ })
				}
				txn := store.NewTxn() // the epoch transaction: the spool and the state
				if err := sk.Sync(ctx, txn); err != nil {
					b.Fatal(err)
				}
				if err := st.Commit(ctx, txn); err != nil {
					b.Fatal(err)
				}
				if j >= len(msgs) {
					clk.Advance(2 * time.Hour) // the last slot ends
				}
				sk.Commit(ctx)
				if j > 2*len(msgs) {
					b.Fatalf("%d of %d acknowledged", acked, len(msgs))
				}
			}
		}
		b.ReportMetric(total*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkTableCodec: the connectors' own per-row work, without store,
// files or engine — the Parquet reader building rows from a table of the
// bench's events (four columns, zstd), and writeParquet writing a
// table of {key, count} rows from messages (the static-table example's
// output). Run with -benchmem: allocations per row are a figure a noisy
// machine does not blur.
func BenchmarkTableCodec(b *testing.B) {
	const n = 100_000
	type event struct {
		Key  string `parquet:"key"`
		Page string `parquet:"page"`
		Ms   int64  `parquet:"ms"`
		Ref  string `parquet:"ref"`
	}
	b.Run("read", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "t.parquet")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := pq.NewGenericWriter[event](f, pq.Compression(&pq.Zstd))
		rows := make([]event, n)
		for i := range rows {
			rows[i] = event{Key: fmt.Sprintf("user-%05d", i%10000), Page: fmt.Sprintf("/catalog/item/%d", i*7919%100000), Ms: 1_700_000_000_000 + int64(i), Ref: "campaign-x"}
		}
		if _, err := w.Write(rows); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := ScanTable(path, func([]weir.Row) error { return nil })
			if err != nil || got != n {
				b.Fatalf("%d rows, %v", got, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("write", func(b *testing.B) {
		rows := make([]*pending, n)
		for i := range rows {
			rows[i] = &pending{msg: &weir.Message{ID: msgid.Ordered(1, "counts", uint64(i)),
				Payload: weir.Row{"key": fmt.Sprintf("user-%05d", i%10000), "count": int64(i / 10000)}}}
		}
		cols := []Column{{Name: "count", Type: ColInt64}, {Name: "key", Type: ColString}}
		codec, _ := parquetCodec("snappy")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := writeParquet(io.Discard, cols, codec, rowsOf(rows), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
