package postgres

// Benchmarks, side by side with the embedded backend in one run so the
// figures share the machine's moment (the disk under /tmp holds both
// Pebble's directory and the PostgreSQL cluster pgtest starts):
//
//	go test -run '^$' -bench . -benchtime 3s -count 2 ./store/postgres
//	go test -run '^$' -bench Layout -benchtime 100x ./store/postgres
//
// BenchmarkCommit: store/pebble's shapes (storetest.BenchCommits) on both
// backends; BenchmarkCheckedCommit the same with a check per commit. BenchmarkTimestamp: Timestamp calls. BenchmarkLayout: the
// measurement behind the schema's layout of the rows (one table keyed by
// table id and key). BenchmarkPlan: the Go side of a commit.

import (
	"fmt"
	"slices"
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

// BenchmarkCheckedCommit: BenchmarkCommit's shapes with each commit
// guarded by a check of its committer's row (storetest.BenchCheckedCommits),
// as epoch commits are.
func BenchmarkCheckedCommit(b *testing.B) {
	for _, backend := range []string{"pebble", "postgres"} {
		for _, committers := range []int{1, 16} {
			for _, rows := range []int{10, 1000} {
				b.Run(fmt.Sprintf("backend=%s/committers=%d/rows=%d", backend, committers, rows), func(b *testing.B) {
					storetest.BenchCheckedCommits(b, benchStore(b, backend), committers, rows)
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

// BenchmarkLayout compares three layouts of the rows by the server's own
// execution time (EXPLAIN ANALYZE, so the client and the network do not
// count), in interleaved rounds on identical data, reporting medians per
// 1000 rows: the statement a commit sends for its puts (an upsert of
// unnest'ed arrays) and an ordered scan. Layouts: the one table keyed by
// the table's name (text), the one table keyed by a table id (int; the
// schema's choice), and a table per logical table. b.N is the number of
// rounds.
func BenchmarkLayout(b *testing.B) {
	url := pgtest.URL(b)
	schema := pgtest.Schema(b, url)
	q := quoteIdent(schema)
	pgtest.Exec(b, url, "CREATE SCHEMA "+q)
	pgtest.Exec(b, url, "CREATE TABLE "+q+`.by_name (tbl text COLLATE "C" NOT NULL, k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (tbl, k))`)
	pgtest.Exec(b, url, "CREATE TABLE "+q+`.by_id (t int NOT NULL, k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (t, k))`)
	pgtest.Exec(b, url, "CREATE TABLE "+q+`.own_table (k bytea PRIMARY KEY, v bytea NOT NULL)`)
	layouts := []struct{ name, upsert, scan string }{
		{"name-in-key",
			"INSERT INTO " + q + ".by_name (tbl, k, v) SELECT 'partition_output_messages', u.k, u.v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (tbl, k) DO UPDATE SET v = excluded.v",
			"SELECT k, v FROM " + q + ".by_name WHERE tbl = 'partition_output_messages' AND k >= $1 ORDER BY k LIMIT 1000"},
		{"id-in-key",
			"INSERT INTO " + q + ".by_id (t, k, v) SELECT 3, u.k, u.v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (t, k) DO UPDATE SET v = excluded.v",
			"SELECT k, v FROM " + q + ".by_id WHERE t = 3 AND k >= $1 ORDER BY k LIMIT 1000"},
		{"table-per-name",
			"INSERT INTO " + q + ".own_table (k, v) SELECT u.k, u.v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
			"SELECT k, v FROM " + q + ".own_table WHERE k >= $1 ORDER BY k LIMIT 1000"},
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
	defer pool.Close()
	serverMS := func(sql string, args ...any) float64 {
		rows, err := pool.Query(b.Context(), "EXPLAIN (ANALYZE) "+sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		ms := -1.0
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			if rest, ok := strings.CutPrefix(line, "Execution Time: "); ok {
				fmt.Sscanf(rest, "%f", &ms)
			}
		}
		if rows.Err() != nil || ms < 0 {
			b.Fatalf("EXPLAIN ANALYZE: no execution time (%v)", rows.Err())
		}
		return ms
	}
	value := []byte(strings.Repeat("v", 40))
	upserts := make([][]float64, len(layouts))
	scans := make([][]float64, len(layouts))
	b.ResetTimer()
	for round := range b.N {
		keys := make([][]byte, 1000)
		vals := make([][]byte, 1000)
		for r := range keys {
			keys[r] = fmt.Appendf(nil, "c%02d-%012d-%04d", round%3, round, r)
			vals[r] = value
		}
		for i, l := range layouts {
			upserts[i] = append(upserts[i], serverMS(l.upsert, keys, vals))
			scans[i] = append(scans[i], serverMS(l.scan, fmt.Appendf(nil, "c%02d-", round%3)))
		}
	}
	b.StopTimer()
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	for i, l := range layouts {
		b.ReportMetric(median(upserts[i]), l.name+"-upsert-ms/1000rows")
		b.ReportMetric(median(scans[i]), l.name+"-scan-ms/1000rows")
	}
}

// BenchmarkCheckRows measures what schema version 2's check_rows costs
// against version 1's by the server's own time (EXPLAIN ANALYZE, medians
// of b.N interleaved rounds, each in a transaction rolled back, so no
// fsync counts): a guarded epoch's check of an existing row then the
// upsert of that row and 10 others ("value"), and the same with the row
// absent ("absent": version 2 claims it with a placeholder the upsert then
// updates). Version 1 is migration 1's schema, version 2 Init's.
func BenchmarkCheckRows(b *testing.B) {
	url := pgtest.URL(b)
	v1 := pgtest.Schema(b, url)
	pgtest.Exec(b, url, "CREATE SCHEMA "+quoteIdent(v1))
	pgtest.Exec(b, url, expand(migrations[0].sql, v1))
	v2 := pgtest.Schema(b, url)
	if _, err := Init(b.Context(), url, v2); err != nil {
		b.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, schema := range []string{v1, v2} {
		pgtest.Exec(b, url, "INSERT INTO "+quoteIdent(schema)+".rows (t, k, v) VALUES (1, 'guard', '7')")
	}
	value := []byte(strings.Repeat("v", 40))
	keys := [][]byte{[]byte("guard")}
	vals := [][]byte{[]byte("8")}
	for r := range 10 {
		keys = append(keys, fmt.Appendf(nil, "row-%04d", r))
		vals = append(vals, value)
	}
	// serverMS runs the check and the upsert in one transaction, rolled
	// back, and returns their execution times' sum.
	serverMS := func(schema string, absent bool) float64 {
		q := quoteIdent(schema)
		tx, err := pool.Begin(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(b.Context())
		guard := []byte("guard")
		if absent {
			guard = []byte("absent-guard")
		}
		check := "EXPLAIN (ANALYZE) SELECT " + q + ".check_rows($1, $2, $3, $4, $5, $6)"
		var args []any
		if schema == v1 {
			args = []any{[]int32{1}, [][]byte{guard}, [][]byte{[]byte("7")}, []bool{absent}, []int32{11}, []int32{22}}
		} else {
			args = []any{[]int32{1}, [][]byte{guard}, [][]byte{[]byte("7")}, []bool{absent}, []bool{true}, []int32{0}}
		}
		ks := append([][]byte{guard}, keys[1:]...)
		total := 0.0
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{check, args},
			{"EXPLAIN (ANALYZE) INSERT INTO " + q + ".rows (t, k, v) SELECT 1, u.k, u.v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (t, k) DO UPDATE SET v = excluded.v", []any{ks, vals}},
		} {
			rows, err := tx.Query(b.Context(), st.sql, st.args...)
			if err != nil {
				b.Fatal(err)
			}
			ms := -1.0
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					b.Fatal(err)
				}
				if rest, ok := strings.CutPrefix(line, "Execution Time: "); ok {
					fmt.Sscanf(rest, "%f", &ms)
				}
			}
			rows.Close()
			if rows.Err() != nil || ms < 0 {
				b.Fatalf("EXPLAIN ANALYZE: no execution time (%v)", rows.Err())
			}
			total += ms
		}
		return total
	}
	times := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		for _, absent := range []bool{false, true} {
			for v, schema := range []string{v1, v2} {
				name := fmt.Sprintf("v%d-value-ms", v+1)
				if absent {
					name = fmt.Sprintf("v%d-absent-ms", v+1)
				}
				times[name] = append(times[name], serverMS(schema, absent))
			}
		}
	}
	b.StopTimer()
	for name, v := range times {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name)
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
		if _, err := s.plan(txn, map[store.Table]int32{"bench": 1}); err != nil {
			b.Fatal(err)
		}
	}
}
