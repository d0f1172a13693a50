package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/examples"
	"github.com/weir-stream/weir/spec"
)

func runDemo(o *Options, args []string) error {
	fs := newFlags(o, "demo", "[--data DIR] [--events N] [--keys K] [--partitions P] [--example NAME] [--seed S]",
		"Generates a stream of page-view events, runs the exactly-once counter\n"+
			"pipeline (examples/counter: QueueSource → Counter → SyncQueueSink) on it\n"+
			"with a live progress line, then verifies its own output: every user's\n"+
			"counts must be exactly 1..n, once each. With --example wordcount the\n"+
			"events are lines of words, and every word's counts are verified.\n"+
			"Without --data it works in a temporary directory and removes it; with\n"+
			"--data it keeps it, so that 'weir queue read --data DIR counts' shows\n"+
			"the result.")
	dir := fs.String("data", "", "data directory to keep (default: a temporary one, removed)")
	events := fs.Int("events", 200000, "number of events to generate")
	keys := fs.Int("keys", 1000, "number of distinct users (keys)")
	parts := fs.Int("partitions", 4, "partitions of the input queue")
	example := fs.String("example", "counter", "example spec to run: "+strings.Join(demoExamples, ", "))
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the generated events")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *events < 1 || *keys < 1 || *parts < 1 {
		return usageErr(fs, "--events, --keys and --partitions must be positive")
	}
	if !slices.Contains(demoExamples, *example) {
		return usageErr(fs, "--example %s: the demo runs %s (it generates their input and verifies their counts); the other examples run with weir run --spec examples/NAME/spec.yson (see the comments at the top of the spec)",
			echo(*example), strings.Join(demoExamples, ", "))
	}
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "weir-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	specBytes, err := examples.Spec(*example)
	if err != nil {
		return err
	}
	p, err := spec.ParseYSON(specBytes)
	if err != nil {
		return err
	}
	st, err := openStore(*dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	w := o.Stdout

	fmt.Fprintf(w, "weir demo: %d page-view events of %d users, example %q, data in %s\n", *events, *keys, *example, *dir)
	in, err := queue.Create(ctx, st, "events", *parts)
	if err == nil {
		_, err = queue.Create(ctx, st, "counts", 2)
	}
	if errors.Is(err, queue.ErrExists) {
		return fmt.Errorf("%s already holds a demo (%w); pass a fresh --data DIR", *dir, err)
	}
	if err != nil {
		return err
	}
	genStart := time.Now()
	want, err := generate(ctx, in, *events, *keys, *seed, *example == "wordcount")
	if err != nil {
		return err
	}
	units := 0 // what Counter counts: events, or words
	for _, n := range want {
		units += n
	}
	fmt.Fprintf(w, "  generated and wrote %d events in %.1fs\n", *events, time.Since(genStart).Seconds())

	r, err := startRunner(ctx, o, *dir, p, st, "127.0.0.1:0", func(string, ...any) {}, func(string, ...any) {})
	if err != nil {
		return err
	}
	defer r.close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	// On a terminal the progress line redraws itself; into a file or a
	// pipe it is a plain line every few seconds.
	// The line holds only numbers and states: written raw, so that its
	// carriage return redraws it.
	tty := isTerminal(o.rawStderr)
	period, format := 2*time.Second, "  %s\n"
	if tty {
		period, format = 500*time.Millisecond, "\r  %s   "
	}
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(o.rawStderr, format, demoProgress(runCtx, r, units))
			}
		}
	}()
	start := time.Now()
	state, err := r.eng.Run(runCtx)
	elapsed := time.Since(start)
	close(done)
	if tty {
		format = "\r  %s   \n"
	}
	fmt.Fprintf(o.rawStderr, format, demoProgress(runCtx, r, units))
	if err != nil {
		return err
	}
	if state != controller.Completed {
		return fmt.Errorf("pipeline ended in state %s", state)
	}

	out, err := queue.Open(ctx, st, "counts")
	if err != nil {
		return err
	}
	v, err := verifyCounts(ctx, out, want)
	if err != nil {
		return err
	}
	s := r.eng.Status()
	fmt.Fprintf(w, "\nSummary\n")
	fmt.Fprintf(w, "  messages:    %d events in, %d counts out\n", *events, v.outputs)
	fmt.Fprintf(w, "  throughput:  %.0f messages/s end to end (%.2fs)\n", float64(*events)/elapsed.Seconds(), elapsed.Seconds())
	fmt.Fprintf(w, "  duplicates:  %d\n", v.duplicates)
	fmt.Fprintf(w, "  losses:      %d\n", v.losses)
	fmt.Fprintf(w, "  keys:        %d checked, %d wrong\n", len(want), v.badKeys)
	fmt.Fprintf(w, "  jobs:        %d started, %d failed, %d lost\n", s.Controller.JobsStarted, s.Controller.JobsFailed, s.Controller.JobsLost)
	// at_least_once_consistent may count an input twice after a restart:
	// only losses fail it.
	exact := *example != "counter-alo"
	if v.losses > 0 || exact && (v.duplicates > 0 || v.badKeys > 0) {
		return fmt.Errorf("verification FAILED: %d losses, %d duplicates, %d wrong keys", v.losses, v.duplicates, v.badKeys)
	}
	fmt.Fprintf(w, "  verified:    every key's counts are exactly 1..n, once each\n")
	return nil
}

// demoExamples are the examples the demo can run: it generates their
// input (events into the queue "events") and verifies their output (the
// counts in the queue "counts").
var demoExamples = []string{"counter", "counter-async", "counter-alo", "wordcount"}

// generate writes page-view events with a skewed (Zipf) user distribution
// and returns each user's event count; with words, each event is instead a
// line {"text": ...} of one to four words drawn the same way (the input of
// examples/wordcount), and it returns each word's count.
func generate(ctx context.Context, q *queue.Queue, n, keys int, seed uint64, words bool) (map[string]int, error) {
	r := rand.New(rand.NewPCG(seed, 42))
	zipf := rand.NewZipf(r, 1.1, 4, uint64(keys-1))
	pages := []string{"/", "/search", "/item", "/cart", "/checkout", "/help"}
	want := map[string]int{}
	const chunk = 10000
	rows := make([]weir.Row, 0, chunk)
	parts := make([]int, 0, chunk)
	base := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		user := fmt.Sprintf("user-%05d", zipf.Uint64())
		row := weir.Row{"key": user, "page": pages[r.IntN(len(pages))], "ms": base + int64(i)}
		if words {
			line := make([]string, 1+r.IntN(4))
			for j := range line {
				line[j] = fmt.Sprintf("w%05d", zipf.Uint64())
				want[line[j]]++
			}
			row = weir.Row{"key": user, "text": strings.Join(line, " ")}
		} else {
			want[user]++
		}
		rows = append(rows, row)
		parts = append(parts, queue.PartitionOf(row, "key", q.Partitions(), nil))
		if len(rows) == chunk || i == n-1 {
			if err := q.Write(ctx, rows, parts); err != nil {
				return nil, err
			}
			rows, parts = rows[:0], parts[:0]
		}
	}
	return want, nil
}

func demoProgress(ctx context.Context, r *runner, total int) string {
	s := r.eng.Status()
	done := s.Computations["Counter"].Inputs
	lag, _ := queueLag(ctx, r.st, r.spec)
	rate := 0.0
	if s.Uptime > 0 {
		rate = float64(done) / s.Uptime
	}
	return fmt.Sprintf("%5.1fs  %s  counted %d/%d (%.0f msg/s)  lag %d", s.Uptime, s.State, done, total, rate, lag)
}

type verification struct {
	outputs, duplicates, losses, badKeys int
}

// verifyCounts checks the output queue against the expected per-key
// counts: a count value seen twice is a duplicate, a missing one a loss.
func verifyCounts(ctx context.Context, q *queue.Queue, want map[string]int) (verification, error) {
	var v verification
	seen := map[string]map[int64]int{}
	for p := 0; p < q.Partitions(); p++ {
		rows, err := q.Read(ctx, p, 0, 0)
		if err != nil {
			return v, err
		}
		for _, row := range rows {
			k, _ := row.Row["key"].(string)
			c, _ := row.Row["count"].(int64)
			if seen[k] == nil {
				seen[k] = map[int64]int{}
			}
			seen[k][c]++
			v.outputs++
		}
	}
	for k, n := range want {
		bad := false
		for i := 1; i <= n; i++ {
			switch seen[k][int64(i)] {
			case 0:
				v.losses++
				bad = true
			case 1:
			default:
				v.duplicates += seen[k][int64(i)] - 1
				bad = true
			}
		}
		extra := 0
		for c, m := range seen[k] {
			if c < 1 || c > int64(n) {
				extra += m
			}
		}
		if extra > 0 {
			// Counts above n: inputs processed twice (at-least-once mode).
			v.duplicates += extra
			bad = true
		}
		if bad {
			v.badKeys++
		}
	}
	for k := range seen {
		if _, ok := want[k]; !ok {
			v.badKeys++
		}
	}
	return v, nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
