package disttest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRescaleFigures measures what a rescale costs a running pipeline
// (issue 27, item 1): the counter runs on two workers and a controller
// over PostgreSQL on loopback, events are written at a steady rate
// (WEIR_DIST_RATE events/s, default 2,000; the Reader polling its queue
// every 20 ms), and the Counter is rescaled through POST /pipeline/rescale
// from 4 to 8 partitions and back to 4. For each rescale it reports:
//
//   - the pause the controller reports: the Counter takes no input from its
//     quiesce to the first reports of its new jobs;
//   - the worst latency (written → counted) of the batches written in the
//     three seconds after the request, beside the median latency of those
//     written in the two seconds before (the usual).
//
// WEIR_DIST_BASELINE=BIN runs the same with another weir binary
// (alternating which goes first), medians of WEIR_DIST_ROUNDS rounds
// (default 3); every run's counts pass the oracle. Behind
// WEIR_DIST_FIGURES=1:
//
//	WEIR_DIST_FIGURES=1 WEIR_DIST_BASELINE=/tmp/weir-base go test -run TestRescaleFigures -v ./internal/disttest
func TestRescaleFigures(t *testing.T) {
	figures(t)
	rate := envInt(t, "WEIR_DIST_RATE", 2000)
	rounds := envInt(t, "WEIR_DIST_ROUNDS", 3)
	bins := figureBins()
	steps := []int{8, 4}
	type key struct{ bin, n int }
	pause := map[key][]time.Duration{}
	worst := map[key][]time.Duration{}
	usual := map[key][]time.Duration{}
	interleave(rounds, len(bins), func(r, b int) {
		t.Run(fmt.Sprintf("r%d-%s", r, binLabel(b)), func(t *testing.T) {
			url, _, c, spec := distSetup(t)
			text := strings.Replace(distSpec, `"computation_class_name" = "SwiftPassthrough";`, `"computation_class_name" = "SwiftPassthrough"; "empty_batch_backoff" = "20ms";`, 1)
			if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			startWorkersBin(t, bins[b], url, 2)
			ctl := startBin(t, bins[b], "c1", "controller", "--store", url, "--spec", spec, "--id", "c1", "-v")
			ctl.await(t, "is active", time.Minute)
			admin := adminAddr(t, ctl)
			load := startLoad(t, c, rate, uint64(r))
			load.pollFor(3 * time.Second)
			for _, n := range steps {
				probe := time.Now()
				load.pollFor(2 * time.Second)
				asked := time.Now()
				adminPost(t, admin, "/pipeline/rescale", fmt.Sprintf(`{"computation": "Counter", "partitions": %d}`, n))
				load.pollFor(3 * time.Second)
				done := regexpFind(t, ctl, fmt.Sprintf(`the rescale of Counter from \d+ to %d partitions is done; it took no input for (\S+)`, n))
				d, err := time.ParseDuration(done)
				if err != nil {
					t.Fatalf("the controller's pause %q: %v", done, err)
				}
				w, at := load.worst(asked, asked.Add(3*time.Second))
				u := load.usual(probe, asked)
				t.Logf("to %d: pause %v; worst latency %v (%v after the request), usual %v", n, d.Round(time.Millisecond), w, at.Sub(asked).Round(time.Millisecond), u)
				k := key{b, n}
				pause[k], worst[k], usual[k] = append(pause[k], d), append(worst[k], w), append(usual[k], u)
			}
			load.end()
			want := c.Total()
			eventually(t, "every event counted", func() bool {
				_, n, err := c.Read(context.Background())
				return err == nil && n >= want
			})
			checkCounts(t, context.Background(), c)
		})
	})
	var tb strings.Builder
	fmt.Fprintf(&tb, "| rescale | binary | pause (no input taken) | worst latency, 3 s after the request | usual latency |\n|---|---|---:|---:|---:|\n")
	from := 4
	for _, n := range steps {
		for b := range bins {
			k := key{b, n}
			fmt.Fprintf(&tb, "| %d → %d | %s | %v | %v | %v |\n", from, n, binLabel(b), median(pause[k]).Round(time.Millisecond), median(worst[k]).Round(time.Millisecond), median(usual[k]).Round(time.Millisecond))
		}
		from = n
	}
	t.Logf("rescale at %d events/s, medians of %d rounds:\n%s", rate, rounds, tb.String())
}

// adminPost POSTs a JSON body to a controller's admin API on loopback (no
// token).
func adminPost(t *testing.T, addr, path, body string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
}

// regexpFind waits until p's output matches re and returns its first
// group.
func regexpFind(t *testing.T, p *proc, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var got string
	eventually(t, "the log matches "+re, func() bool {
		m := rx.FindStringSubmatch(p.out.String())
		if m != nil {
			got = m[1]
		}
		return m != nil
	})
	return got
}
