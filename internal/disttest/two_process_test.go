package disttest

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// pgStore creates a store of its own schema on the tests' PostgreSQL.
func pgStore(t *testing.T) (string, store.Store) {
	t.Helper()
	base := pgtest.URL(t)
	url := pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base))
	ctx := context.Background()
	if _, err := open.Init(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := open.Store(ctx, url, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return url, st
}

// TestRunOnPostgres: weir run --store postgres://… runs the embedded
// engine (one process, its own workers) on PostgreSQL: the counter to
// completion, exactly once.
func TestRunOnPostgres(t *testing.T) {
	url, st := pgStore(t)
	ctx := context.Background()
	c, err := NewCounter(ctx, st, 3, 2)
	if err == nil {
		err = c.Write(ctx, rand.New(rand.NewPCG(3, 1)), 2000, 30, 500)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "run", "run", "--store", url, "--spec", counterSpec(), "--progress", "0")
	if err := p.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("weir run --store: %v\n%s", err, p.out.String())
	}
	if strings.Contains(p.out.String(), "password") {
		t.Fatalf("the output mentions a password:\n%s", p.out.String())
	}
	checkCounts(t, ctx, c)
}

// TestTwoWorkersOnPostgres: a controller and two workers, three processes
// on loopback over PostgreSQL, run the counter example to completion; each
// key's counts are 1..n exactly once, read from the sink queue.
func TestTwoWorkersOnPostgres(t *testing.T) {
	url, st := pgStore(t)
	ctx := context.Background()
	c, err := NewCounter(ctx, st, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, rand.New(rand.NewPCG(17, 1)), 3000, 50, 500); err != nil {
		t.Fatal(err)
	}
	workers := startWorkers(t, url, 2, "-v")
	ctl := start(t, "controller", "controller", "--store", url, "--spec", counterSpec(), "-v")
	if err := ctl.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("controller: %v", err)
	}
	t.Logf("controller:\n%s", tail(ctl.out.String()))
	for _, w := range workers {
		t.Logf("%s:\n%s", w.name, tail(w.out.String()))
	}
	got, total, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bad := testconn.ExactlyOnce(got, c.Want); len(bad) > 0 {
		t.Fatalf("%d of %d outputs; violations: %v", total, c.Total(), bad)
	}
}
