package disttest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHandoverFigures measures what a controller handover costs a running
// pipeline (issue 27, item 2): the counter runs on two workers with an
// active controller and a standby, events are written at a steady rate
// (WEIR_DIST_RATE events/s, default 2,000; job leases of 5 s, which
// outlive a takeover; the Reader polling its queue every 20 ms), and the
// active controller is stopped with SIGTERM (it resigns; the standby takes
// over at its next poll) or killed with SIGKILL (the standby takes over
// once the leadership lease, 2 s here, expired). From the counts queue, read as it grows, it
// takes each written batch's latency (written → counted) and reports:
//
//   - the worst latency of the batches written in the three seconds after
//     the stop (a SIGKILLed leader's successor leads within 2.5 s), beside
//     the median latency of those written in the two seconds before (the
//     usual);
//   - how many jobs the new leader started (weir_jobs_total): every one
//     before adoption, none with it when the leases outlive the takeover.
//
// WEIR_DIST_BASELINE=BIN runs the same with another weir binary
// (alternating which goes first; WEIR_DIST_BIN replaces this build), medians of WEIR_DIST_ROUNDS rounds
// (default 3). Every run's counts pass the oracle. Behind
// WEIR_DIST_FIGURES=1:
//
//	WEIR_DIST_FIGURES=1 WEIR_DIST_BASELINE=/tmp/weir-base go test -run TestHandoverFigures -v ./internal/disttest
func TestHandoverFigures(t *testing.T) {
	figures(t)
	rate := envInt(t, "WEIR_DIST_RATE", 2000)
	rounds := envInt(t, "WEIR_DIST_ROUNDS", 3)
	bins := figureBins()
	type figs struct {
		worst, usual []time.Duration
		started      []float64
	}
	type key struct {
		bin int
		sig syscall.Signal
	}
	res := map[key]*figs{}
	sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	interleave(rounds, len(bins), func(r, b int) {
		for _, sig := range sigs {
			t.Run(fmt.Sprintf("r%d-%s-%s", r, binLabel(b), sigName(sig)), func(t *testing.T) {
				h := runHandover(t, bins[b], sig, rate, uint64(r))
				t.Logf("worst latency %v (%v after the stop), usual %v; the new leader started %v jobs", h.worst, h.worstAt, h.usual, h.started)
				f := res[key{b, sig}]
				if f == nil {
					f = &figs{}
					res[key{b, sig}] = f
				}
				f.worst = append(f.worst, h.worst)
				f.usual = append(f.usual, h.usual)
				f.started = append(f.started, h.started)
			})
		}
	})
	var tb strings.Builder
	fmt.Fprintf(&tb, "| controller | binary | worst latency after the stop | usual latency | jobs the new leader started |\n|---|---|---:|---:|---:|\n")
	for _, sig := range sigs {
		for b := range bins {
			f := res[key{b, sig}]
			if f == nil {
				continue
			}
			fmt.Fprintf(&tb, "| %s | %s | %v | %v | %.0f |\n", sigName(sig), binLabel(b), median(f.worst).Round(time.Millisecond),
				median(f.usual).Round(time.Millisecond), medianF(f.started))
		}
	}
	t.Logf("handover at %d events/s, medians of %d rounds:\n%s", rate, rounds, tb.String())
}

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// handover is one run's figures (see TestHandoverFigures).
type handover struct {
	worst, worstAt, usual time.Duration
	started               float64
}

// runHandover runs one handover with bin, the active controller stopped
// by sig.
func runHandover(t *testing.T, bin string, sig syscall.Signal, rate int, seed uint64) handover {
	url, _, c, spec := distSetup(t)
	ctx := context.Background()
	// Job leases that outlive a takeover after a crash (the leadership
	// lease, 2 s, plus the standby's poll): adoptable then too.
	text := strings.Replace(distSpec, `"lease_timeout" = "2s"`, `"lease_timeout" = "5s"`, 1)
	// A queue source on PostgreSQL is not woken by writes: after a read that
	// found nothing it waits empty_batch_backoff (250 ms by default), and
	// those waits were the 200–250 ms latency spikes every few seconds that
	// hid a handover's. The Reader polls every 20 ms here
	// (WEIR_DIST_READER_BACKOFF sets another period).
	backoff := cmp.Or(os.Getenv("WEIR_DIST_READER_BACKOFF"), "20ms")
	text = strings.Replace(text, `"computation_class_name" = "SwiftPassthrough";`, `"computation_class_name" = "SwiftPassthrough"; "empty_batch_backoff" = "`+backoff+`";`, 1)
	if text == distSpec {
		t.Fatal("the spec's lease_timeout was not replaced")
	}
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var v []string
	if os.Getenv("WEIR_DIST_VERBOSE") == "1" {
		v = []string{"-v"}
	}
	procs := startWorkersBin(t, bin, url, 2, v...)
	first := startBin(t, bin, "c1", append([]string{"controller", "--store", url, "--spec", spec, "--id", "c1", "--lease-timeout", "2s"}, v...)...)
	first.await(t, "is active", time.Minute)
	second := startBin(t, bin, "c2", append([]string{"controller", "--store", url, "--spec", spec, "--id", "c2", "--lease-timeout", "2s"}, v...)...)
	second.await(t, "admin API at", time.Minute)
	procs = append(procs, first, second)

	load := startLoad(t, c, rate, seed)
	load.pollFor(3 * time.Second) // warm up, then the usual latency
	probe := time.Now()
	load.pollFor(2 * time.Second)
	stop := time.Now()
	first.cmd.Process.Signal(sig)
	load.pollFor(10 * time.Second)
	load.end()
	var h handover
	h.usual = load.usual(probe, stop)
	worst, at := load.worst(stop, stop.Add(3*time.Second))
	h.worst, h.worstAt = worst, at.Sub(stop)
	h.started = metricValue(t, adminAddr(t, second), `weir_jobs_total{event="started"}`)
	if len(v) > 0 {
		t.Logf("stopped at %s; the worst latency at %s", stop.Format("15:04:05.000000"), stop.Add(h.worstAt).Format("15:04:05.000000"))
		for _, p := range procs {
			t.Logf("%s:\n%s", p.name, p.out.String())
		}
	}
	want := c.Total()
	eventually(t, "every event counted", func() bool {
		_, n, err := c.Read(ctx)
		return err == nil && n >= want
	})
	checkCounts(t, ctx, c)
	return h
}
