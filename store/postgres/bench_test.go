package postgres

// Benchmarks, side by side with the embedded backend in one run so the
// figures share the machine's moment (the disk under /tmp holds both
// Pebble's directory and the PostgreSQL cluster pgtest starts):
//
//	go test -run '^$' -bench . -benchtime 3s ./store/postgres
//
// BenchmarkCommit: store/pebble's shapes (storetest.BenchCommits) on both
// backends. BenchmarkTimestamp: Timestamp calls. BenchmarkLayout: the
// measurement behind the schema's one rows table keyed (tbl, k) against a
// table per logical table. BenchmarkPlan: the Go side of a commit.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/store/postgres/pgtest"
	"github.com/weir-stream/weir/store/storetest"
)

// benchStore opens a fresh store of the backend for a benchmark.
func benchStore(b *testing.B, backend string) store.Store {
	b.Helper()
	switch backend {
	case "pebble":
		s, err := pebble.Open(b.TempDir(), pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	default:
		s, _ := newStore(b, Options{})
		// Connect the 16 committers' connections now, not in the timed loop.
		var conns []*pgxpool.Conn
		for range 16 {
			c, err := s.pool.Acquire(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Release()
		}
		return s
	}
}

func BenchmarkCommit(b *testing.B) {
	for _, backend := range []string{"pebble", "postgres"} {
		for _, committers := range []int{1, 16} {
			for _, rows := range []int{10, 1000} {
				b.Run(fmt.Sprintf("backend=%s/committers=%d/rows=%d", backend, committers, rows), func(b *testing.B) {
					storetest.BenchCommits(b, benchStore(b, backend), committers, rows)
				})
			}
		}
	}
}

func BenchmarkTimestamp(b *testing.B) {
	for _, backend := range []string{"pebble", "postgres"} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("backend=%s/callers=%d", backend, callers), func(b *testing.B) {
				s := benchStore(b, backend)
				storetest.Concurrently(b, callers, func(int, int64) error {
					_, err := s.Timestamp(b.Context())
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timestamps/s")
			})
		}
	}
}

// BenchmarkLayout compares the two layouts considered for the rows: the
// schema's single table keyed (tbl, k) and a table per logical table keyed
// k, with the statement the store sends for a commit's puts (an upsert of
// unnest'ed arrays), 1000 rows per commit, 1 and 16 committers, and an
// ordered scan of 1000 rows.
func BenchmarkLayout(b *testing.B) {
	url := pgtest.URL(b)
	for _, layout := range []string{"one-table", "table-per-name"} {
		schema := pgtest.Schema(b, url)
		pgtest.Exec(b, url, "CREATE SCHEMA "+quoteIdent(schema))
		q := quoteIdent(schema)
		var upsert, scan string
		if layout == "one-table" {
			pgtest.Exec(b, url, "CREATE TABLE "+q+`.rows (tbl text COLLATE "C" NOT NULL, k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (tbl, k))`)
			upsert = "INSERT INTO " + q + ".rows (tbl, k, v) SELECT $1, u.k, u.v FROM unnest($2::bytea[], $3::bytea[]) AS u(k, v) ON CONFLICT (tbl, k) DO UPDATE SET v = excluded.v"
			scan = "SELECT k, v FROM " + q + ".rows WHERE tbl = $1 AND k >= $2 ORDER BY k LIMIT 1000"
		} else {
			pgtest.Exec(b, url, "CREATE TABLE "+q+`.partition_output_messages (k bytea PRIMARY KEY, v bytea NOT NULL)`)
			upsert = "INSERT INTO " + q + ".partition_output_messages (k, v) SELECT u.k, u.v FROM unnest($2::bytea[], $3::bytea[]) AS u(k, v) WHERE $1::text IS NOT NULL ON CONFLICT (k) DO UPDATE SET v = excluded.v"
			scan = "SELECT k, v FROM " + q + ".partition_output_messages WHERE $1::text IS NOT NULL AND k >= $2 ORDER BY k LIMIT 1000"
		}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range sessionParams {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
		pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		value := []byte(strings.Repeat("v", 40))
		for _, committers := range []int{1, 16} {
			b.Run(fmt.Sprintf("layout=%s/commit/committers=%d/rows=1000", layout, committers), func(b *testing.B) {
				storetest.Concurrently(b, committers, func(c int, n int64) error {
					keys := make([][]byte, 1000)
					vals := make([][]byte, 1000)
					for r := range keys {
						keys[r] = fmt.Appendf(nil, "c%02d-%012d-%04d", c, n, r)
						vals[r] = value
					}
					_, err := pool.Exec(context.Background(), upsert, "partition_output_messages", keys, vals)
					return err
				})
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
			})
		}
		b.Run(fmt.Sprintf("layout=%s/scan/rows=1000", layout), func(b *testing.B) {
			for range b.N {
				rows, err := pool.Query(b.Context(), scan, "partition_output_messages", []byte("c00-"))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				if rows.Err() != nil || n != 1000 {
					b.Fatalf("scan: %d rows, %v", n, rows.Err())
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
		})
		pool.Close()
	}
}

// BenchmarkPlan measures the Go side of a 1000-row commit: reducing the
// Txn to its statements.
func BenchmarkPlan(b *testing.B) {
	s := &Store{schema: "weir", sql: newStatements("weir")}
	value := []byte(strings.Repeat("v", 40))
	txn := store.NewTxn(7)
	for r := range 1000 {
		txn.Put("bench", fmt.Appendf(nil, "c%02d-%012d-%04d", 1, 2, r), value)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.plan(txn); err != nil {
			b.Fatal(err)
		}
	}
}
