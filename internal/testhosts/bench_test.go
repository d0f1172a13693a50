package testhosts

// Benchmarks behind the figures a distributed test's budget rests on (they
// are reported, not asserted): making a network of 4 hosts, and
// PostgreSQL in a host — initdb + start, a clean restart, and a SIGKILL of
// every process followed by a relaunch with crash recovery.
//
//	go test -run '^$' -bench . -benchtime 10x -count 5 ./internal/testhosts/

import (
	"testing"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func BenchmarkNetwork4Hosts(b *testing.B) {
	Require(b)
	sweepOnce.Do(func() { sweepErr = sweepStale() })
	for i := 0; i < b.N; i++ {
		n, err := create("a", "b", "c", "d")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkPostgresInHost(b *testing.B) {
	pgtest.Require(b)
	b.Run("initdb+start", func(b *testing.B) {
		n := New(b, "pg")
		for i := 0; i < b.N; i++ {
			pg, err := n.Host("pg").StartPostgres()
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			pg.srv.Stop()
			b.StartTimer()
		}
	})
	b.Run("restart", func(b *testing.B) {
		pg := benchPostgres(b)
		for i := 0; i < b.N; i++ {
			if err := pg.Restart(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crash+relaunch", func(b *testing.B) {
		pg := benchPostgres(b)
		for i := 0; i < b.N; i++ {
			if err := pg.Crash(); err != nil {
				b.Fatal(err)
			}
			if err := pg.Relaunch(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPostgres starts a server in a host of a new network with a table
// of 10,000 committed rows (a recovery with something to recover).
func benchPostgres(b *testing.B) *Postgres {
	b.Helper()
	n := New(b, "pg")
	pg, err := n.Host("pg").StartPostgres()
	if err != nil {
		b.Fatal(err)
	}
	pgtest.Exec(b, pg.SocketURL(), "CREATE TABLE kv AS SELECT g AS k, md5(g::text) AS v FROM generate_series(1, 10000) g")
	b.ResetTimer()
	return pg
}
