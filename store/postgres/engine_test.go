package postgres

// The engine on this store: the counter pipeline of internal/enginetest
// (sources, a Transform reader, a keyed Counter over three partitions, a
// collecting sink; the real controller, workers, jobs, leases and
// transport) committing to PostgreSQL, with the exactly-once oracle: every
// key's counts are 1..n, once each. Once on a clean connection, once
// through a proxy that cuts commit pipelines at random — before the Sync
// (not applied) or after the server committed (applied) — so epoch commits
// really come back ambiguous and the engine must resolve each through its
// guarded partition_transactions row.

import (
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestEngineExactlyOnce(t *testing.T) {
	for _, cut := range []bool{false, true} {
		name := "clean"
		if cut {
			name = "cut-commits"
		}
		t.Run(name, func(t *testing.T) {
			url := pgtest.URL(t)
			schema := pgtest.Schema(t, url)
			if _, err := Init(t.Context(), url, schema); err != nil {
				t.Fatal(err)
			}
			var proxy *pgtest.Proxy
			connURL := url
			if cut {
				proxy = pgtest.NewProxy(t, url)
				// A commit pipeline has two statements or more (the lease,
				// the guard, the writes); reads have one.
				proxy.Random(11, 0.1, 60, 2)
				connURL = proxy.URL
			}
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := openSchema(t, connURL, schema, Options{Clock: clk})
			h := enginetest.New(t, enginetest.Options{Seed: 5, Messages: 1500, Store: s, Clock: clk})
			if err := h.RunToCompletion(t.Context(), 120*time.Second); err != nil {
				t.Fatal(err)
			}
			h.RequireExactlyOnce(t.Context())
			if cut {
				before, after := proxy.Cuts(pgtest.CutBeforeSync), proxy.Cuts(pgtest.CutAfterCommit)
				if before == 0 || after == 0 {
					t.Fatalf("the proxy cut %d commits before the Sync and %d after the commit; the test needs both", before, after)
				}
				t.Logf("commits cut: %d before the Sync, %d after the commit; controller %+v", before, after, h.Ctl.Stats())
			}
		})
	}
}
