package postgres

// External state on this store: the counter keeps its counts only in an
// external state table (enginetest.ExternalCounter), with a second
// computation writing a disjoint key range, jobs crashed at every crash
// point and commit pipelines cut by the proxy (ambiguous commits): both
// ranges of the table are exact and the emitted counts are 1..n once each.
// And two computations racing read-modify-writes on the same rows: the
// commit's checks (check_rows) refuse the stale one, so no update is lost.

import (
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestEngineExternalState(t *testing.T) {
	for _, racing := range []bool{false, true} {
		name := "disjoint-crashes-cut-commits"
		if racing {
			name = "racing-writers"
		}
		t.Run(name, func(t *testing.T) {
			url := pgtest.URL(t)
			schema := pgtest.Schema(t, url)
			if _, err := Init(t.Context(), url, schema); err != nil {
				t.Fatal(err)
			}
			connURL := url
			var proxy *pgtest.Proxy
			o := enginetest.Options{Seed: 7, Messages: 1000, External: true}
			if racing {
				o.SecondWriter, o.Keys, o.BatchRows = "Counter", 4, 5
			} else {
				proxy = pgtest.NewProxy(t, url)
				proxy.Random(13, 0.08, 40, 2)
				connURL = proxy.URL
				o.SecondWriter = "Counter2"
				o.Hooks = enginetest.NewCrashes(3, 0.05, 20)
			}
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			o.Clock, o.Store = clk, openSchema(t, connURL, schema, Options{Clock: clk})
			h := enginetest.New(t, o)
			if err := h.RunToCompletion(t.Context(), 120*time.Second); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if racing {
				want := map[string]int{}
				for k, n := range h.Expected {
					want[k] = 2 * n
				}
				bad, err := enginetest.CheckExternalCounts(ctx, h.Store, "Counter", want)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bad {
					t.Error(b)
				}
				t.Logf("controller %+v", h.Ctl.Stats())
				return
			}
			h.RequireExactlyOnce(ctx)
			for _, owner := range []string{"Counter", "Counter2"} {
				bad, err := enginetest.CheckExternalCounts(ctx, h.Store, owner, h.Expected)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bad {
					t.Error(b)
				}
			}
			got, err := testconn.CountsOf(ctx, h.Store, "out2")
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range testconn.ExactlyOnce(got, h.Expected) {
				t.Error("Counter2: " + b)
			}
			t.Logf("commits cut: %d before the Sync, %d after the commit; controller %+v",
				proxy.Cuts(pgtest.CutBeforeSync), proxy.Cuts(pgtest.CutAfterCommit), h.Ctl.Stats())
		})
	}
}
