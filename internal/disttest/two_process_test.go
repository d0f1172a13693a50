package disttest

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/controller"
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

// TestRescaleBySpecOnPostgres (issue 27, item 1): a spec whose
// partition_count differs from the running layout's is a rescale, on
// PostgreSQL as on Pebble. weir run with the Counter on 4 partitions is
// SIGKILLed while it counts (input in flight); weir run with the same
// spec but 8 starts with the stored layout, rescales live to 8 while more
// input arrives, and every event is counted exactly once.
func TestRescaleBySpecOnPostgres(t *testing.T) {
	url, st := pgStore(t)
	ctx := context.Background()
	c, err := NewCounter(ctx, st, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(27, 8))
	if err := c.Write(ctx, r, 10000, 40, 500); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	four := filepath.Join(dir, "four.yson")
	eight := filepath.Join(dir, "eight.yson")
	if err := os.WriteFile(four, []byte(distSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(distSpec, `"group_by" = ["key"];`, `"group_by" = ["key"]; "partition_count" = 8;`, 1)
	if err := os.WriteFile(eight, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	counted := func() int {
		_, n, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := start(t, "run4", "run", "--store", url, "--spec", four, "--progress", "0", "-v")
	eventually(t, "some events counted", func() bool { return counted() > 0 })
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	if n := counted(); n >= c.Total() {
		t.Logf("every event (%d) was counted before the kill: nothing in flight for the rescale this time", n)
	}
	second := start(t, "run8", "run", "--store", url, "--spec", eight, "--progress", "0", "-v")
	second.await(t, "rescaling Counter from 4 to 8 partitions", time.Minute)
	if err := c.Write(ctx, r, 2000, 40, 100); err != nil {
		t.Fatal(err)
	}
	second.await(t, "the rescale of Counter from 4 to 8 partitions is done", time.Minute)
	if err := c.Write(ctx, r, 1000, 40, 100); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every event counted", func() bool { return counted() >= c.Total() })
	second.cmd.Process.Signal(syscall.SIGTERM)
	<-second.done
	checkCounts(t, ctx, c)
	rec, _, err := controller.LoadLayout(ctx, st)
	if err != nil || rec.Counts["Counter"] != 8 || len(rec.Targets) != 0 {
		t.Fatalf("the stored layout %+v (%v); want Counter on 8, no target", rec, err)
	}
}
