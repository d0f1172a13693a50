package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/wire"
)

// TestClusterAdminNeedsToken: the controller's admin API refuses a request
// without the cluster token or with a wrong one, and serves it with the
// right one (a standby says so).
func TestClusterAdminNeedsToken(t *testing.T) {
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := &clusterAdmin{sec: wire.Security{Token: "s3cret"}, st: st}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"s3cret", http.StatusUnauthorized},
		{"Bearer s3cret", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/status", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, rec.Code, tc.want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/drain?worker=w1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("drain on a standby: %d", rec.Code)
	}
	// Without a token configured (loopback) a drain is refused: a web
	// page could send that POST.
	open := &clusterAdmin{st: st}
	rec = httptest.NewRecorder()
	open.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/drain?worker=w1", nil))
	if rec.Code != http.StatusForbidden {
		t.Errorf("drain without a configured token: %d, want 403", rec.Code)
	}
}

// TestControllerStatusDeposed: a controller whose leadership lease expired
// in its store — cut off or frozen past it, a standby took over — answers
// GET /status with "active": false, "deposed": true, its old term and the
// highest term, although its engine has not stopped yet. Before, it kept
// answering "active": true with its old term until its engine wound down
// (up to 7.5 s after a partition healed, issue 27).
func TestControllerStatusDeposed(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	st, sp := counterFixture(t, pstore.Options{Clock: clk})
	ctx := context.Background()
	for _, q := range []string{"events", "counts"} {
		if _, err := queue.Create(ctx, st, q, 1); err != nil {
			t.Fatal(err)
		}
	}
	act := testActive(t, st, sp, "old")
	l := act.Leadership
	a := newClusterAdmin(wire.Security{Token: "s3cret-s3cret-s3cret"}, st, sp)
	a.console = a.newConsole(sp)
	defer a.console.stop()
	a.set(act)
	call := func(path string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer s3cret-s3cret-s3cret")
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec
	}
	get := func() map[string]any {
		t.Helper()
		rec := call("/status")
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
		}
		return out
	}
	if s := get(); s["active"] != true || s["term"] != float64(l.Term()) || s["pipeline"] == nil || s["lag"] == nil {
		t.Fatalf("the leader's status: %v", s)
	}
	m := call("/metrics").Body.String()
	for _, want := range []string{"weir_controller_active 1\n", fmt.Sprintf("weir_controller_term %s\n", strconv.FormatFloat(float64(l.Term()), 'g', -1, 64)), `weir_pipeline_state{state="working"} 1`} {
		if !strings.Contains(m, want) {
			t.Fatalf("the leader's /metrics lacks %q:\n%s", want, m)
		}
	}
	clk.Advance(6 * time.Second) // its lease expires; a standby takes over
	next, err := cluster.Campaign(ctx, st, cluster.LeaderRecord{ID: "new"}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s := get()
	if s["active"] != false || s["deposed"] != true || s["term"] != float64(l.Term()) || s["highest_term"] != float64(next.Term()) {
		t.Fatalf("the deposed controller's status: %v; want active false, deposed, term %d, highest_term %d", s, l.Term(), next.Term())
	}
	if s["pipeline"] != nil || s["workers"] != nil {
		t.Fatalf("the deposed controller still reports its pipeline: %v", s)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("the deposed controller's leadership goes on")
	}
	var cd struct{ Active bool }
	if err := json.Unmarshal(call("/console/data").Body.Bytes(), &cd); err != nil || cd.Active {
		t.Fatalf("the deposed controller's console says active: %v", err)
	}
	m = call("/metrics").Body.String()
	if !strings.Contains(m, "weir_controller_active 0\n") || !strings.Contains(m, fmt.Sprintf("weir_controller_term %s\n", strconv.FormatFloat(float64(next.Term()), 'g', -1, 64))) || strings.Contains(m, "weir_pipeline_state") {
		t.Fatalf("the deposed controller's /metrics:\n%s", m)
	}
}

// testActive makes controller id the leader of st and builds its engine
// (sp's pipeline) over a pool without workers: an active controller for
// the admin API's handlers.
func testActive(t *testing.T, st store.Store, sp *spec.Pipeline, id string) *cluster.Active {
	t.Helper()
	ctx := context.Background()
	l, err := cluster.Campaign(ctx, st, cluster.LeaderRecord{ID: id}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pool := cluster.NewPool(cluster.PoolConfig{Store: st})
	eng, err := engine.New(ctx, engine.Config{Spec: sp, Store: st, Classes: engine.DefaultClasses(), Connectors: engine.DefaultConnectors(), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster.Active{Engine: eng, Pool: pool, Leadership: l}
}
