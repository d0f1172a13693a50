package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/examples"
	"github.com/weir-stream/weir/internal/chaos"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// benchCase is one row of the bench table.
type benchCase struct {
	Name string `json:"name"`
	// Kind: "store" (raw synced commits), "floor" (in-memory pass-through),
	// "pipeline" (an example spec, optionally modified) or "latency".
	Kind       string `json:"kind"`
	Example    string `json:"example,omitempty"`
	Mode       string `json:"mode,omitempty"`
	AtMostOnce bool   `json:"at_most_once,omitempty"`
	BatchRows  int    `json:"batch_rows,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	Messages   int    `json:"messages"`
	// Rate is the offered rate of a latency case (messages/s).
	Rate float64 `json:"rate,omitempty"`
}

// benchResult is what one case measured.
type benchResult struct {
	Case          benchCase `json:"case"`
	MsgsPerSec    float64   `json:"msgs_per_sec"`
	P50           float64   `json:"p50_ms"`
	P99           float64   `json:"p99_ms"`
	CPUPerMillion float64   `json:"cpu_s_per_million"`
	PeakRSSMiB    float64   `json:"peak_rss_mib"`
	StoreBytesMsg float64   `json:"store_bytes_per_msg"`
	Err           string    `json:"error,omitempty"`
}

func runBench(o *Options, args []string) error {
	fs := newFlags(o, "bench", "[--quick] [--messages N] [--json]",
		"Measures weir on this machine and prints one table, every row run side by\n"+
			"side in one invocation (each in its own process, so CPU and peak RSS are\n"+
			"its own): the store's raw synced commit rate for the same rows (the\n"+
			"limit), an in-memory pass-through with no guarantees (the floor),\n"+
			"exactly_once, at_least_once_consistent, a Swift chain, AsyncQueueSink,\n"+
			"at_most_once_strategy, end-to-end latency at half of the exactly-once\n"+
			"peak, and a sweep of batch size and partition count. Ratios are to\n"+
			"exactly_once. Messages are ~100-byte events over 10,000 keys.")
	quick := fs.Bool("quick", false, "small sizes: finishes in well under a minute")
	msgs := fs.Int("messages", 0, "messages per throughput row (default 300000; 20000 with --quick)")
	asJSON := fs.Bool("json", false, "print results as JSON lines instead of a table")
	one := fs.String("one", "", "internal: run one case given as JSON and print its result")
	cpuprofile := fs.String("cpuprofile", "", "with --one: write a CPU profile of the case to this file")
	memprofile := fs.String("memprofile", "", "with --one: write a heap profile (in-use at the peak sample) to this file")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *one != "" {
		var c benchCase
		if err := json.Unmarshal([]byte(*one), &c); err != nil {
			return err
		}
		if *cpuprofile != "" {
			f, err := os.Create(*cpuprofile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		stop := func() {}
		if *memprofile != "" {
			stop = sampleHeapPeak(*memprofile)
		}
		res := runBenchCase(o, c)
		stop()
		return json.NewEncoder(o.Stdout).Encode(res)
	}
	n := *msgs
	if n == 0 {
		n = 300000
		if *quick {
			n = 20000
		}
	}
	cases := []benchCase{
		{Name: "store: raw synced commits", Kind: "store", Messages: n},
		{Name: "floor: in-memory, no guarantees", Kind: "floor", Messages: n},
		{Name: "exactly_once", Kind: "pipeline", Example: "counter", Messages: n},
		{Name: "at_least_once_consistent", Kind: "pipeline", Example: "counter-alo", Messages: n},
		{Name: "swift chain", Kind: "pipeline", Example: "swift-chain", Messages: n},
		{Name: "AsyncQueueSink", Kind: "pipeline", Example: "counter-async", Messages: n},
		{Name: "at_most_once_strategy", Kind: "pipeline", Example: "counter-async", AtMostOnce: true, Messages: n},
	}
	sweepBatch := []int{100, 1000, 10000}
	sweepParts := []int{1, 4, 8}
	if *quick {
		sweepBatch, sweepParts = []int{100, 10000}, []int{1, 8}
	}
	for _, b := range sweepBatch {
		cases = append(cases, benchCase{Name: fmt.Sprintf("exactly_once, batch %d", b), Kind: "pipeline", Example: "counter", BatchRows: b, Messages: n})
	}
	for _, p := range sweepParts {
		cases = append(cases, benchCase{Name: fmt.Sprintf("exactly_once, %d partitions", p), Kind: "pipeline", Example: "counter", Partitions: p, Messages: n})
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var results []benchResult
	var eoRate float64
	run := func(c benchCase) benchResult {
		fmt.Fprintf(o.Stderr, "bench: %s …\n", c.Name)
		r := runBenchChild(self, c)
		if r.Err != "" {
			fmt.Fprintf(o.Stderr, "bench: %s: %s\n", c.Name, r.Err)
		}
		results = append(results, r)
		if *asJSON {
			json.NewEncoder(o.Stdout).Encode(r)
		}
		return r
	}
	for _, c := range cases {
		r := run(c)
		if c.Name == "exactly_once" {
			eoRate = r.MsgsPerSec
		}
	}
	kills := 5
	if *quick {
		kills = 2
	}
	run(benchCase{Name: "recovery: SIGKILL → first commit", Kind: "recovery", Example: "counter", Messages: max(n/3, 10000), Rate: float64(kills)})
	if eoRate > 0 {
		lat := n / 2
		if !*quick {
			lat = min(n, 200000)
		}
		run(benchCase{Name: "latency, exactly_once at half peak", Kind: "latency", Example: "counter", Messages: lat, Rate: eoRate / 2})
	}
	if !*asJSON {
		printBenchTable(o.Stdout, results, eoRate)
	}
	for _, r := range results {
		if r.Err != "" {
			return errors.New("some bench rows failed")
		}
	}
	return nil
}

func runBenchChild(self string, c benchCase) benchResult {
	b, _ := json.Marshal(c)
	cmd := exec.Command(self, "bench", "--one", string(b))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var r benchResult
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		r = benchResult{Case: c, Err: fmt.Sprintf("%v: %s", err, strings.TrimSpace(errb.String()))}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if c.Messages > 0 {
			r.CPUPerMillion = cpu.Seconds() / float64(c.Messages) * 1e6
		}
		r.PeakRSSMiB = float64(ru.Maxrss) / 1024
	}
	return r
}

func printBenchTable(w io.Writer, rs []benchResult, eo float64) {
	fmt.Fprintf(w, "\n%-38s %12s %8s %8s %8s %10s %9s %10s\n", "case", "msg/s", "vs EO", "p50 ms", "p99 ms", "CPU s/1M", "RSS MiB", "store B/msg")
	for _, r := range rs {
		ratio := "-"
		if eo > 0 && r.MsgsPerSec > 0 {
			ratio = fmt.Sprintf("%.2fx", r.MsgsPerSec/eo)
		}
		lat := func(v float64) string {
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", v)
		}
		if r.Err != "" {
			fmt.Fprintf(w, "%-38s FAILED: %s\n", r.Case.Name, r.Err)
			continue
		}
		if r.Case.Kind == "recovery" {
			// Only the latency columns mean something: the kills' recovery
			// times (the work runs in child processes).
			fmt.Fprintf(w, "%-38s %12s %8s %8s %8s %10s %9s %10s\n", r.Case.Name, "-", "-", lat(r.P50), lat(r.P99), "-", "-", "-")
			continue
		}
		fmt.Fprintf(w, "%-38s %12.0f %8s %8s %8s %10.2f %9.0f %10.1f\n", r.Case.Name, r.MsgsPerSec, ratio,
			lat(r.P50), lat(r.P99), r.CPUPerMillion, r.PeakRSSMiB, r.StoreBytesMsg)
	}
}

// benchRow is the generated event: ~100 bytes encoded.
func benchRow(r *rand.Rand, i int) weir.Row {
	return weir.Row{"key": fmt.Sprintf("user-%05d", r.IntN(10000)), "page": "/catalog/item/" + fmt.Sprint(r.IntN(100000)),
		"ms": int64(1_700_000_000_000 + i), "ref": "campaign-x"}
}

func runBenchCase(o *Options, c benchCase) benchResult {
	res := benchResult{Case: c}
	dir, err := os.MkdirTemp("", "weir-bench-")
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	switch c.Kind {
	case "store":
		err = benchStore(dir, c, &res)
	case "floor":
		err = benchFloor(c, &res)
	case "pipeline", "latency":
		err = benchPipeline(o, dir, c, &res)
	case "recovery":
		err = benchRecovery(dir, c, &res)
	default:
		err = fmt.Errorf("unknown bench kind %q", c.Kind)
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.StoreBytesMsg = float64(dirSize(dir)) / float64(max(c.Messages, 1))
	if c.Kind == "floor" || c.Kind == "recovery" {
		res.StoreBytesMsg = 0
	}
	return res
}

// benchStore commits, synced, the rows an exactly-once counter epoch writes
// per message (an output row, a dedup row, a state row) in batches of 1000
// messages: the storage limit under the pipeline.
func benchStore(dir string, c benchCase, res *benchResult) error {
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 1))
	start := time.Now()
	const batch = 1000
	for i := 0; i < c.Messages; i += batch {
		txn := store.NewTxn()
		for j := i; j < min(i+batch, c.Messages); j++ {
			row, _ := codec.AppendRow(nil, benchRow(r, j))
			txn.Append(store.QueueRows, []byte("out\x00\x00\x00\x00\x00"), row)
			txn.Put(store.CompactInputMessages, codec.AppendUint64BE([]byte("Counter\x00words\x00"), uint64(j)), nil)
			txn.Put(store.States, []byte(fmt.Sprintf("Counter\x00%08d\x00count", r.IntN(10000))), []byte("12345"))
		}
		if err := st.Commit(ctx, txn); err != nil {
			return err
		}
	}
	res.MsgsPerSec = float64(c.Messages) / time.Since(start).Seconds()
	return nil
}

// benchFloor decodes each event, counts per key in a map and encodes the
// output: the work of the counter with no store, no dedup, no guarantees.
func benchFloor(c benchCase, res *benchResult) error {
	r := rand.New(rand.NewPCG(1, 1))
	in := make([][]byte, c.Messages)
	for i := range in {
		in[i], _ = codec.AppendRow(nil, benchRow(r, i))
	}
	counts := map[string]int64{}
	var out []byte
	start := time.Now()
	for _, b := range in {
		row, _, err := codec.DecodeRow(b)
		if err != nil {
			return err
		}
		k := row["key"].(string)
		counts[k]++
		out, _ = codec.AppendRow(out[:0], weir.Row{"key": k, "count": counts[k]})
	}
	res.MsgsPerSec = float64(c.Messages) / time.Since(start).Seconds()
	return nil
}

// swiftChainSpec is QueueSource → SwiftPassthrough → SwiftPassthrough →
// Counter → SyncQueueSink: the cost of Swift hops.
const swiftChainSpec = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "consumer_path" = "bench"; "finite" = %true}}};
        "output_stream_ids" = ["a"];
    };
    "Hop" = {
        "computation_class_name" = "SwiftPassthrough";
        "group_by" = ["key"];
        "input_stream_ids" = ["a"];
        "output_stream_ids" = ["b"];
    };
    "Counter" = {
        "computation_class_name" = "Counter";
        "group_by" = ["key"];
        "input_stream_ids" = ["b"];
        "output_stream_ids" = ["counts"];
        "sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["counts"];
            "parameters" = {"queue_path" = "counts"}}};
    };
};
"streams" = {"a" = {}; "b" = {}; "counts" = {}};
`

func benchPipeline(o *Options, dir string, c benchCase, res *benchResult) error {
	var specBytes []byte
	var err error
	if c.Example == "swift-chain" {
		specBytes = []byte(swiftChainSpec)
	} else if specBytes, err = examples.Spec(c.Example); err != nil {
		return err
	}
	p, err := spec.ParseYSON(specBytes)
	if err != nil {
		return err
	}
	for _, comp := range p.Computations {
		if c.BatchRows > 0 {
			comp.MaxRowsPerBatch = c.BatchRows
		}
		if c.Partitions > 0 && len(comp.SourceStreams) == 0 {
			comp.PartitionCount = c.Partitions
		}
		comp.EmptyBatchBackoff = spec.Duration(time.Millisecond)
		if c.AtMostOnce {
			for _, s := range comp.Sinks {
				s.AtMostOnceStrategy = &spec.AtMostOnceStrategy{Enabled: true, TotalQueueBytesLimit: 1 << 30, SuspendDestructionDuration: spec.Duration(10 * time.Second)}
			}
		}
	}
	p.Dynamic.SchedulerPeriod = spec.Duration(10 * time.Millisecond)
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	parts := 4
	if c.Partitions > 0 {
		parts = c.Partitions
	}
	in, err := queue.Create(ctx, st, "events", parts)
	if err != nil {
		return err
	}
	out, err := queue.Create(ctx, st, "counts", 4)
	if err != nil {
		return err
	}
	if c.Kind == "latency" {
		p.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = false
		return benchLatency(o, st, p, in, out, c, res)
	}
	r := rand.New(rand.NewPCG(1, 1))
	const chunk = 10000
	for i := 0; i < c.Messages; i += chunk {
		var rows []weir.Row
		var ps []int
		for j := i; j < min(i+chunk, c.Messages); j++ {
			row := benchRow(r, j)
			rows = append(rows, row)
			ps = append(ps, queue.PartitionOf(row, "key", parts, nil))
		}
		if err := in.Write(ctx, rows, ps); err != nil {
			return err
		}
	}
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: o.Classes, Connectors: o.Connectors})
	if err != nil {
		return err
	}
	start := time.Now()
	state, err := e.Run(ctx)
	if err != nil {
		return err
	}
	if state != controller.Completed {
		return fmt.Errorf("pipeline ended in %s", state)
	}
	// Async sinks deliver after the pipeline's own commits: count the
	// output to make sure the row measured the whole delivery.
	res.MsgsPerSec = float64(c.Messages) / time.Since(start).Seconds()
	return nil
}

// benchLatency offers events at a fixed rate to a running pipeline and
// measures, for each, the time from its write to its count's appearance in
// the output queue (polled every millisecond).
func benchLatency(o *Options, st store.Store, p *spec.Pipeline, in, out *queue.Queue, c benchCase, res *benchResult) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: o.Classes, Connectors: o.Connectors})
	if err != nil {
		return err
	}
	go e.Run(ctx)
	r := rand.New(rand.NewPCG(2, 2))
	// The Counter's output carries the key and count; the i-th event of a
	// key produces count i. Remember when each (key, count) was written.
	written := map[string][]time.Time{}
	var lat []float64
	next := map[int]uint64{}
	poll := func() error {
		for part := 0; part < out.Partitions(); part++ {
			rows, err := out.Read(ctx, part, next[part], 0)
			if err != nil {
				return err
			}
			now := time.Now()
			for _, row := range rows {
				k, _ := row.Row["key"].(string)
				n, _ := row.Row["count"].(int64)
				if ts := written[k]; int(n) >= 1 && int(n) <= len(ts) {
					lat = append(lat, float64(now.Sub(ts[n-1]))/float64(time.Millisecond))
				}
				next[part] = row.Index + 1
			}
		}
		return nil
	}
	interval := time.Duration(float64(time.Second) / c.Rate * 100) // 100 events per write
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	sent := 0
	for sent < c.Messages {
		<-tick.C
		var rows []weir.Row
		var ps []int
		now := time.Now()
		for j := 0; j < 100 && sent < c.Messages; j++ {
			row := benchRow(r, sent)
			rows = append(rows, row)
			ps = append(ps, queue.PartitionOf(row, "key", in.Partitions(), nil))
			k := row["key"].(string)
			written[k] = append(written[k], now)
			sent++
		}
		if err := in.Write(ctx, rows, ps); err != nil {
			return err
		}
		if err := poll(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(lat) < c.Messages && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		if err := poll(); err != nil {
			return err
		}
	}
	e.Controller().SetTarget(controller.Stopped)
	if len(lat) < c.Messages {
		return fmt.Errorf("only %d of %d outputs arrived", len(lat), c.Messages)
	}
	sort.Float64s(lat)
	res.P50 = lat[len(lat)/2]
	res.P99 = lat[len(lat)*99/100]
	res.MsgsPerSec = float64(c.Messages) / time.Since(start).Seconds()
	return nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// sampleHeapPeak writes, when the returned function is called, the heap
// profile taken at the largest in-use heap seen by a sampler running every
// 100 ms: where a case's peak memory goes.
func sampleHeapPeak(path string) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	var best bytes.Buffer
	var peak uint64
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
				best.Reset()
				pprof.Lookup("heap").WriteTo(&best, 0)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		os.WriteFile(path, best.Bytes(), 0o644)
	}
}

// benchRecovery runs 'weir run' (this binary) on the counter example,
// SIGKILLs it Rate times at random moments and restarts it, and reports the
// time from each kill to the first epoch commit of the restarted process
// (p50, p99 in the latency columns). The output is checked for exactly-once
// as in the chaos runs.
func benchRecovery(dir string, c benchCase, res *benchResult) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := chaos.RunProcess(context.Background(), chaos.ProcessConfig{
		Bin: self, Dir: dir, Example: c.Example, Events: c.Messages, Keys: 1000, Seed: 1,
		Kills: int(c.Rate), LeaseTimeout: 2 * time.Second,
	})
	if r.Failed() {
		return fmt.Errorf("recovery run: %s", strings.Join(r.Violations, "; "))
	}
	if len(r.KillRecovery) == 0 {
		return errors.New("recovery run: no kill was measured")
	}
	res.P50 = float64(chaos.Percentile(r.KillRecovery, .5)) / float64(time.Millisecond)
	res.P99 = float64(chaos.Percentile(r.KillRecovery, .99)) / float64(time.Millisecond)
	return nil
}
