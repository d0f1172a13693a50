package disttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/open"
)

// figures skips a figures test unless WEIR_DIST_FIGURES=1: they measure
// (minutes of runs), CI runs the properties (TestMultiHostChaos).
func figures(t *testing.T) {
	t.Helper()
	if os.Getenv("WEIR_DIST_FIGURES") != "1" {
		t.Skip("figures: set WEIR_DIST_FIGURES=1")
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}

// TestThroughputFigures runs the counter example (finite queue, events
// over 50 keys) to completion in five setups, interleaved over rounds: the
// embedded engine on Pebble (weir run --data), the embedded engine on
// PostgreSQL (weir run --store), and the distributed mode with 1, 2 and 3
// worker processes and a controller on PostgreSQL, all on loopback. Each
// round runs every setup with a small and a large input; the marginal
// rate (large − small events over the difference of their wall times,
// process start to exit) leaves out the fixed costs of starting processes,
// electing, registering and detecting completion, which the small run's
// time shows. Medians over rounds; the oracle is checked after every run.
func TestThroughputFigures(t *testing.T) {
	figures(t)
	const small, large, rounds = 2000, 200000, 3
	setups := []string{"pebble", "postgres-embedded", "dist-1", "dist-2", "dist-3"}
	if s := os.Getenv("WEIR_DIST_SETUPS"); s != "" {
		setups = strings.Split(s, ",")
	}
	fixed := map[string][]time.Duration{}
	rates := map[string][]float64{}
	for round := 0; round < rounds; round++ {
		for _, s := range setups {
			ts := runThroughput(t, s, small, uint64(round))
			tl := runThroughput(t, s, large, uint64(round))
			rate := float64(large-small) / (tl - ts).Seconds()
			fixed[s] = append(fixed[s], ts)
			rates[s] = append(rates[s], rate)
			t.Logf("round %d %s: %d events %v, %d events %v: %.0f events/s", round, s, small, ts.Round(time.Millisecond), large, tl.Round(time.Millisecond), rate)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| setup | fixed (%d events) | events/s (marginal) | vs pebble |\n|---|---:|---:|---:|\n", small)
	base := 0.0
	if r := rates["pebble"]; len(r) > 0 {
		base = medianF(r)
	}
	for _, s := range setups {
		m := medianF(rates[s])
		fmt.Fprintf(&b, "| %s | %v | %.0f | %.2f |\n", s, median(fixed[s]).Round(time.Millisecond), m, m/base)
	}
	t.Logf("medians of %d rounds:\n%s", rounds, b.String())
}

func medianF(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func runThroughput(t *testing.T, setup string, n int, seed uint64) time.Duration {
	t.Helper()
	ctx := context.Background()
	if setup == "pebble" {
		dir := t.TempDir()
		st, err := open.Store(ctx, filepath.Join(dir, "store"), open.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCounter(ctx, st, 4, 2)
		if err == nil {
			err = c.Write(ctx, rand.New(rand.NewPCG(seed, 1)), n, 50, 5000)
		}
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		p := start(t, "run", "run", "--data", dir, "--spec", counterSpec(), "--progress", "0")
		if err := p.wait(t, 10*time.Minute); err != nil {
			t.Fatalf("weir run: %v\n%s", err, p.out.String())
		}
		d := time.Since(began)
		st, err = open.Store(ctx, filepath.Join(dir, "store"), open.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		c2 := *c
		if c2.Counts, err = queue.Open(ctx, st, "counts"); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, ctx, &c2)
		return d
	}
	url, st := pgStore(t)
	c, err := NewCounter(ctx, st, 4, 2)
	if err == nil {
		err = c.Write(ctx, rand.New(rand.NewPCG(seed, 1)), n, 50, 5000)
	}
	if err != nil {
		t.Fatal(err)
	}
	var workers []*proc
	var k int
	if _, err := fmt.Sscanf(setup, "dist-%d", &k); err == nil {
		ports, err := testproc.FreePorts(k)
		if err != nil {
			t.Fatal(err)
		}
		for i, port := range ports {
			args := []string{"worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", fmt.Sprintf("w%d", i)}
			if dir := os.Getenv("WEIR_DIST_PROFILE"); dir != "" && n > 10000 {
				args = append(args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("%s-w%d.pprof", setup, i)))
			}
			w := start(t, fmt.Sprintf("worker%d", i), args...)
			w.await(t, "listening on", time.Minute)
			workers = append(workers, w)
		}
	}
	began := time.Now()
	var p *proc
	if setup == "postgres-embedded" {
		p = start(t, "run", "run", "--store", url, "--spec", counterSpec(), "--progress", "0")
	} else {
		p = start(t, "controller", "controller", "--store", url, "--spec", counterSpec())
	}
	if err := p.wait(t, 10*time.Minute); err != nil {
		t.Fatalf("%s: %v\n%s", setup, err, p.out.String())
	}
	d := time.Since(began)
	for _, w := range workers {
		w.stop(t) // SIGTERM: a profile is written on exit
	}
	checkCounts(t, ctx, c)
	return d
}

func checkCounts(t *testing.T, ctx context.Context, c *Counter) {
	t.Helper()
	got, total, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bad := testconn.ExactlyOnce(got, c.Want); len(bad) > 0 {
		t.Fatalf("%d outputs; exactly-once violated: %v", total, bad[:min(5, len(bad))])
	}
}

// TestRecoveryFigures kills a worker host 20 times (of three, over TLS with
// a token, the counter pipeline running; each time the one with the most
// jobs, once the layout is balanced) and reports the time from each kill
// to the first commit of a replacement job, and to the last: p50 and p99.
func TestRecoveryFigures(t *testing.T) {
	figures(t)
	hc := newHostCluster(t, "w1", "w2", "w3")
	for _, w := range []string{"w1", "w2", "w3"} {
		hc.startWorker(w)
	}
	hc.startController("ctl1")
	r := rand.New(rand.NewPCG(99, 1))
	ctx := context.Background()
	var firsts, alls []time.Duration
	for i := 0; i < 20; i++ {
		if err := hc.c.Write(ctx, r, 300, 40, 100); err != nil {
			t.Fatal(err)
		}
		// The victim is the worker with the most jobs, once the layout is
		// balanced again after the previous loss (the restarted worker got
		// its share back).
		var victim string
		hc.eventually("a balanced layout", func() bool {
			l := hc.status()
			if !l.healthy() {
				return false
			}
			per, most := l.spread()
			if len(per) != 3 || most > (jobsTotal+2)/3 {
				return false
			}
			for w, n := range per {
				if n == most {
					victim = w
				}
			}
			return true
		})
		first, all := hc.killWorkerHost(victim)
		if first > 0 {
			firsts, alls = append(firsts, first), append(alls, all)
		}
	}
	want := hc.c.Total()
	hc.eventually("all events counted", func() bool {
		_, total, err := hc.c.Read(ctx)
		return err == nil && total >= want
	})
	checkCounts(t, ctx, hc.c)
	t.Logf("%d worker host losses with jobs: first replacement commit p50 %v p99 %v (max %v); all replaced p50 %v p99 %v",
		len(firsts), median(firsts).Round(time.Millisecond), quantile(firsts, 0.99).Round(time.Millisecond), quantile(firsts, 1).Round(time.Millisecond),
		median(alls).Round(time.Millisecond), quantile(alls, 0.99).Round(time.Millisecond))
}
