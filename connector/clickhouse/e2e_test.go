package clickhouse_test

// End to end: examples/clickhouse/spec.yson (queue → Counter →
// ClickHouseBatchingSink) into a ReplicatedMergeTree on the real 18.16
// server, through a proxy that cuts the answer of INSERTs ClickHouse
// applied. Jobs are crashed at every named point of the epoch (in
// process), and the real weir binary is SIGKILLed at random moments; each
// key's counts are 1..n exactly once in SELECT.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/spec"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// exampleSpec returns examples/clickhouse/spec.yson aimed at host and
// table, with max_batch_rows batch.
func exampleSpec(t testing.TB, host, table string, batch int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "clickhouse", "spec.yson"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{`"localhost:8123"`, fmt.Sprintf("%q", host)},
		{`"key_counts"`, fmt.Sprintf("%q", table)},
		{`"max_batch_rows" = 10000;`, fmt.Sprintf(`"max_batch_rows" = %d; "retry_initial_delay" = 5; "retry_maximum_delay" = 100;`, batch)},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("example spec lacks %s", r[0])
		}
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// events returns n rows over keys keys and the expected count per key.
func events(n, keys int, seed uint64) ([]weir.Row, map[string]int) {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([]weir.Row, n)
	want := map[string]int{}
	for i := range rows {
		k := fmt.Sprintf("k%03d", r.IntN(keys))
		want[k]++
		rows[i] = weir.Row{"key": k, "i": int64(i)}
	}
	return rows, want
}

// dropEveryThird makes the proxy cut the answer of every third INSERT
// after ClickHouse applied it.
func dropEveryThird(p *chserver.Proxy) {
	p.SetDecide(func(n int, _ string) chserver.Fault {
		if n%3 == 0 {
			return chserver.DropResponse
		}
		return chserver.Pass
	})
}

// TestEngineExactlyOnce runs the example in process with jobs crashed at
// every named point of the epoch, including after the commit and before
// the sink's INSERT results are recorded.
func TestEngineExactlyOnce(t *testing.T) {
	srv := chserver.Shared(t)
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			table := replicated(t, srv)
			proxy := chserver.NewProxy(t, srv.HTTP)
			dropEveryThird(proxy)
			p, err := spec.Parse([]byte(exampleSpec(t, proxy.Host(), table, 20)), "spec.yson")
			if err != nil {
				t.Fatal(err)
			}
			rows, want := events(1500, 40, seed)
			crashes := enginetest.NewCrashes(seed, 0.1, 25)
			// Injected crashes are job failures: keep their restart backoff
			// short, or a few in a row wait 30 s each.
			p.Dynamic.JobRestartBackoff = spec.Duration(10 * time.Millisecond)
			p.Dynamic.JobRestartBackoffMax = spec.Duration(100 * time.Millisecond)
			runEngine(t, p, rows, crashes)
			checkExact(t, counts(t, srv, table), want)
			if crashes.Total() == 0 || proxy.Count(chserver.DropResponse) == 0 {
				t.Errorf("crashes %v, dropped answers %d: the run proves nothing", crashes.Injected, proxy.Count(chserver.DropResponse))
			}
			t.Logf("crashes %v; INSERTs %d, answers dropped after apply %d", crashes.Injected, proxy.Inserts(), proxy.Count(chserver.DropResponse))
		})
	}
}

// runEngine writes rows to the queue "events" (3 partitions) of a fresh
// store and runs p in process, with hooks (nil: none), until it completes
// (two minutes at most); the test fails otherwise, with the log's tail.
// It returns the engine's status at the end and the log lines.
func runEngine(t testing.TB, p *spec.Pipeline, rows []weir.Row, hooks job.Hooks) (engine.Status, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, logs := newEngine(t, ctx, p, rows, hooks)
	state, err := e.Run(ctx)
	if err != nil || state != controller.Completed {
		text := strings.Join(logs(), "\n")
		t.Fatalf("run ended in %s: %v\n%s", state, err, text[max(0, len(text)-5000):])
	}
	return e.Status(), logs()
}

// newEngine writes rows to the queue "events" (3 partitions) of a fresh
// store (closed by the test's cleanup) and returns an engine for p, with
// hooks (nil: none), and a function returning its log lines so far.
func newEngine(t testing.TB, ctx context.Context, p *spec.Pipeline, rows []weir.Row, hooks job.Hooks) (*engine.Engine, func() []string) {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q, err := queue.Create(ctx, st, "events", 3)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]int, len(rows))
	for i := range parts {
		parts[i] = i % 3
	}
	if err := q.Write(ctx, rows, parts); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: engine.DefaultClasses(),
		Connectors: engine.DefaultConnectors(), Logf: logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return e, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), logs...)
	}
}

var (
	weirOnce sync.Once
	weirBin  string
	weirErr  error
)

// buildWeir builds the weir command once per test binary.
func buildWeir(t testing.TB) string {
	t.Helper()
	weirOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-ch-bin-")
		if err != nil {
			weirErr = err
			return
		}
		weirBin = filepath.Join(dir, "weir")
		out, err := exec.Command("go", "build", "-o", weirBin, "../../cmd/weir").CombinedOutput()
		if err != nil {
			weirErr = fmt.Errorf("build weir: %v\n%s", err, out)
		}
	})
	if weirErr != nil {
		t.Fatal(weirErr)
	}
	return weirBin
}

func runWeir(t testing.TB, bin, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestWeirRunKilled runs the example with the real binary, SIGKILLs it at
// random moments and reruns it until the pipeline completes, with every
// third INSERT's answer cut after ClickHouse applied it.
func TestWeirRunKilled(t *testing.T) {
	srv := chserver.Shared(t)
	bin := buildWeir(t)
	table := replicated(t, srv)
	proxy := chserver.NewProxy(t, srv.HTTP)
	dropEveryThird(proxy)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yson")
	if err := os.WriteFile(specPath, []byte(exampleSpec(t, proxy.Host(), table, 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	runWeir(t, bin, "", "queue", "create", "--data", data, "--partitions", "3", "events")
	rows, want := events(20000, 200, 7)
	var in strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&in, `{"key": %q, "i": %d}`+"\n", r["key"], r["i"])
	}
	runWeir(t, bin, in.String(), "queue", "write", "--data", data, "events")

	r := rand.New(rand.NewPCG(7, 2))
	kills := 0
	for attempt := 0; ; attempt++ {
		if attempt > 30 {
			t.Fatalf("the pipeline did not complete after %d runs", attempt)
		}
		cmd := exec.Command(bin, "run", "--data", data, "--spec", specPath, "--progress", "0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var delay <-chan time.Time
		if kills < 6 {
			delay = time.After(time.Duration(100+r.IntN(500)) * time.Millisecond)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("weir run failed: %v\n%s", err, stderr.String())
			}
		case <-delay:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
			continue
		case <-time.After(3 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("weir run hung\n%s", stderr.String())
		}
		break
	}
	checkExact(t, counts(t, srv, table), want)
	if kills == 0 || proxy.Count(chserver.DropResponse) == 0 {
		t.Errorf("kills %d, dropped answers %d: the run proves nothing", kills, proxy.Count(chserver.DropResponse))
	}
	t.Logf("%d SIGKILLs; INSERTs %d, answers dropped after apply %d", kills, proxy.Inserts(), proxy.Count(chserver.DropResponse))
}

// TestExampleSpecPlan: examples/clickhouse/spec.yson builds a plan with
// the default connectors (no server is contacted).
func TestExampleSpecPlan(t *testing.T) {
	p, err := spec.Parse([]byte(exampleSpec(t, "localhost:8123", "key_counts", 100)), "spec.yson")
	if err != nil {
		t.Fatal(err)
	}
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := queue.Create(context.Background(), st, "events", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.BuildPlan(context.Background(), p, engine.DefaultClasses(), engine.DefaultConnectors(), st); err != nil {
		t.Fatal(err)
	}
}
