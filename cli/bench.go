package cli

import (
	"bytes"
	"cmp"
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
	"regexp"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/examples"
	"github.com/weir-stream/weir/internal/chaos"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/flinkbench"
	"github.com/weir-stream/weir/internal/handwritten"
	"github.com/weir-stream/weir/internal/kafkabroker"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// benchCase is one row of the bench table.
type benchCase struct {
	Name string `json:"name"`
	// Kind: "store" (raw synced commits), "floor" (in-memory pass-through),
	// "pipeline" (an example spec, optionally modified), "latency",
	// "recovery", "handwritten" (the hand-written exactly-once queue loop,
	// internal/handwritten), "kafka" (the kafka example) or
	// "kafka-handwritten" (the hand-written franz-go loop), on Broker;
	// "flink" (Apache Flink's keyed count, internal/flinkbench).
	Kind       string `json:"kind"`
	Example    string `json:"example,omitempty"`
	Mode       string `json:"mode,omitempty"`
	AtMostOnce bool   `json:"at_most_once,omitempty"`
	BatchRows  int    `json:"batch_rows,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	Messages   int    `json:"messages"`
	// Rate is the offered rate of a latency case (messages/s).
	Rate float64 `json:"rate,omitempty"`
	// CheckpointMs is a Flink case's checkpoint interval, and Runs how
	// many times it runs its job in one JVM (the row is the last run).
	CheckpointMs int `json:"checkpoint_ms,omitempty"`
	Runs         int `json:"runs,omitempty"`
	// Parallelism is a Flink case's (0: flinkbench's default, the
	// machine's CPUs); its input is still split into Partitions files, as
	// weir's input queue is.
	Parallelism int `json:"parallelism,omitempty"`
	// Broker is the broker a Kafka case runs against: "kfake" (franz-go's
	// in-process fake; the default) or "kafka" (Apache Kafka, one KRaft
	// node started by internal/kafkabroker).
	Broker string `json:"broker,omitempty"`
	// Brokers of the cluster a Kafka case runs against (set by the parent,
	// which runs the broker in a process of its own; empty: the case
	// starts one).
	Brokers []string `json:"brokers,omitempty"`
}

// benchResult is what one case measured.
type benchResult struct {
	Case          benchCase `json:"case"`
	MsgsPerSec    float64   `json:"msgs_per_sec"`
	P50           float64   `json:"p50_ms"`
	P99           float64   `json:"p99_ms"`
	CPUPerMillion float64   `json:"cpu_s_per_million"`
	PeakRSSMiB    float64   `json:"peak_rss_mib"`
	// PeakAnonMiB is the peak anonymous resident memory of the timed part
	// (anonSampler): the engine's memory without the binary's mapped file.
	PeakAnonMiB   float64 `json:"peak_anon_mib,omitempty"`
	StoreBytesMsg float64 `json:"store_bytes_per_msg"`
	// WrittenBytesMsg is what the timed part wrote per message through
	// write calls (selfWritten): the store's log, flushes and compactions.
	WrittenBytesMsg float64 `json:"written_bytes_per_msg,omitempty"`
	// AllocBytesMsg is the Go heap allocated by the timed part per message
	// (runtime.MemStats.TotalAlloc): the garbage collector's work, and a
	// figure that moves little with the machine's load.
	AllocBytesMsg float64 `json:"alloc_bytes_per_msg,omitempty"`
	// CPUScope says what CPUPerMillion covers: "run" (the timed part only,
	// measured by the case itself) or "process" (the whole child process,
	// input generation included: a binary that does not measure the run).
	CPUScope string `json:"cpu_scope,omitempty"`
	// BrokerCPUPerMillion and BrokerRSSMiB are the broker process's CPU
	// from its readiness to its stop and peak RSS (Kafka cases; for Apache
	// Kafka its JVM's; not included in the row's own).
	BrokerCPUPerMillion float64 `json:"broker_cpu_s_per_million,omitempty"`
	BrokerRSSMiB        float64 `json:"broker_peak_rss_mib,omitempty"`
	// Binary is the weir binary that ran the case (--json with --baseline).
	Binary string `json:"binary,omitempty"`
	Err    string `json:"error,omitempty"`
}

func runBench(o *Options, args []string) error {
	fs := newFlags(o, "bench", "[--quick] [--messages N] [--repeat N] [--rows REGEXP] [--kafka-broker kfake|real|both] [--baseline BIN] [--json]",
		"Measures weir on this machine and prints one table, every row run side by\n"+
			"side in one invocation (each in its own process, so CPU and peak RSS are\n"+
			"its own): the store's raw synced commit rate for the same rows and an\n"+
			"in-memory pass-through with no guarantees (the floors); the hand-written\n"+
			"exactly-once loop a user would write instead of weir (the comparator);\n"+
			"exactly_once, at_least_once_consistent, a Swift chain, AsyncQueueSink,\n"+
			"at_most_once_strategy, a sweep of batch size and partition count; weir\n"+
			"and a hand-written franz-go transactional loop on Kafka (kfake, an\n"+
			"in-process fake; or a real Apache Kafka "+kafkabroker.Version+" broker with\n"+
			"--kafka-broker; each row a fresh broker in a process of its own, not in\n"+
			"the row's figures); recovery after SIGKILL; end-to-end latency at half of\n"+
			"the exactly-once peak. Ratios are to exactly_once, to the comparator (the\n"+
			"franz-go loop on the same broker for Kafka rows) and to the floors.\n"+
			"Where a JDK and Flink's jars are here ("+flinkbench.Jars.Fetcher+"),\n"+
			"Apache Flink "+flinkbench.Version+" counts the same events (RocksDB state, exactly-once\n"+
			"checkpoints; its second run in one JVM) beside weir.\n"+
			"Messages are ~100-byte events over 10,000 keys.")
	quick := fs.Bool("quick", false, "small sizes: finishes in well under a minute")
	msgs := fs.Int("messages", 0, "messages per throughput row (default 300000; 20000 with --quick)")
	asJSON := fs.Bool("json", false, "print every run's result as a JSON line instead of the table")
	repeat := fs.Int("repeat", 1, "run every row N times, interleaved (all rows, then all rows again), and report each column's median")
	rows := fs.String("rows", "", "run only the rows whose name matches this regular expression (the latency row also needs exactly_once)")
	baseline := fs.String("baseline", "", "another weir binary (before a change): run every row with it too, alternating with this one, and print its rows under this one's")
	one := fs.String("one", "", "internal: run one case given as JSON and print its result (a Kafka case's \"broker\": \"kfake\", the default, or \"kafka\" for Apache Kafka; it starts its own broker)")
	kafkaBroker := fs.String("kafka-broker", "kfake", "the broker of the Kafka rows: kfake (franz-go's in-process fake, no Java needed), real (Apache Kafka "+kafkabroker.Version+", one KRaft node on loopback; needs java and the jars: "+kafkabroker.Jars.Fetcher+") or both (every Kafka row on each, side by side in the same rounds); --quick starts a real broker only if asked")
	broker := fs.Bool("broker", false, "internal: run the Kafka broker of --kafka-broker (kfake or kafka) for a Kafka row, print its address and stop when stdin closes")
	cpuprofile := fs.String("cpuprofile", "", "with --one: write a CPU profile of the case to this file")
	memprofile := fs.String("memprofile", "", "with --one: write a heap profile (in-use at the peak sample) to this file")
	allocprofile := fs.String("allocprofile", "", "with --one: write a heap profile when the case ends, for its allocations over the whole case (go tool pprof -sample_index=alloc_space)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *broker {
		b := *kafkaBroker
		if b == "real" {
			b = brokerKafka
		}
		return runBenchBroker(o, b)
	}
	if *one != "" {
		var c benchCase
		if err := json.Unmarshal([]byte(*one), &c); err != nil {
			return err
		}
		stopCPU, err := startCPUProfile(*cpuprofile)
		if err != nil {
			return err
		}
		defer stopCPU()
		stop := func() {}
		if *memprofile != "" {
			stop = sampleHeapPeak(*memprofile)
		}
		res := runBenchCase(o, c)
		stop()
		if *allocprofile != "" {
			if err := writeHeapProfile(*allocprofile); err != nil {
				return err
			}
		}
		return json.NewEncoder(o.Stdout).Encode(res)
	}
	if *repeat < 1 {
		return usageErr(fs, "--repeat must be at least 1")
	}
	kafkaBrokers, err := parseKafkaBrokers(*kafkaBroker)
	if err != nil {
		return err
	}
	var only *regexp.Regexp
	if *rows != "" {
		var err error
		if only, err = regexp.Compile(*rows); err != nil {
			return usageErr(fs, "--rows: %v", err)
		}
	}
	n := *msgs
	if n == 0 {
		n = 300000
		if *quick {
			n = 20000
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bins := []string{self}
	if *baseline != "" {
		bins = append(bins, *baseline)
	}
	t := &benchTable{bins: bins, runs: map[benchKey][]benchResult{}}
	// round runs c once with every binary, alternating which goes first
	// from round to round, so that neither always runs on a machine warmed
	// (or loaded) by the other.
	round := func(c benchCase, r int) {
		if only != nil && !only.MatchString(c.Name) {
			return
		}
		t.add(c)
		for i := range bins {
			b := (i + r) % len(bins)
			label := c.Name
			if b > 0 {
				label += " [baseline]"
			}
			fmt.Fprintf(o.Stderr, "bench: %s (round %d of %d) …\n", label, r+1, *repeat)
			res := runBenchChild(self, bins[b], c)
			if res.Err != "" {
				fmt.Fprintf(o.Stderr, "bench: %s: %s\n", label, res.Err)
			}
			if *asJSON {
				res.Binary = bins[b]
				json.NewEncoder(o.Stdout).Encode(res)
			}
			t.runs[benchKey{b, c.Name}] = append(t.runs[benchKey{b, c.Name}], res)
		}
	}
	// Throughput rows: each round runs all of them, so that a slow moment
	// of the shared machine hits different rows in different rounds.
	cases := benchCases(n, *quick, kafkaBrokers)
	if fc, err := flinkCase(n); err != nil {
		if only == nil || only.MatchString(flinkRow) {
			fmt.Fprintf(o.Stderr, "bench: %v\n", err)
		}
	} else {
		cases = append(cases, fc)
	}
	for r := 0; r < *repeat; r++ {
		for _, c := range cases {
			round(c, r)
		}
	}
	run := func(c benchCase) {
		for r := 0; r < *repeat; r++ {
			round(c, r)
		}
	}
	kills := 5
	if *quick {
		kills = 2
	}
	run(benchCase{Name: "recovery: SIGKILL → first commit", Kind: "recovery", Example: "counter", Messages: max(n/3, 10000), Rate: float64(kills)})
	if eo := t.median(0, eoRow).MsgsPerSec; eo > 0 {
		lat := n / 2
		if !*quick {
			lat = min(n, 200000)
		}
		run(benchCase{Name: "latency, exactly_once at half peak", Kind: "latency", Example: "counter", Messages: lat, Rate: eo / 2})
	}
	if !*asJSON {
		t.print(o.Stdout)
	}
	// A baseline's failures (an older binary lacks newer kinds of rows)
	// are shown in the table but do not fail the command.
	for k, rs := range t.runs {
		for _, r := range rs {
			if r.Err != "" && k.bin == 0 {
				return errors.New("some bench rows failed")
			}
		}
	}
	return nil
}

// The rows other rows are compared with.
const (
	eoRow       = "exactly_once"
	handRow     = "hand-written exactly-once loop (Pebble)"
	memFloorRow = "floor: in-memory, no guarantees"
	storeRow    = "store: raw synced commits"
)

// benchCases are the throughput rows of a bench run with n messages a row,
// the Kafka rows once per broker of kafkaBrokers (kfake, kafka).
func benchCases(n int, quick bool, kafkaBrokers []string) []benchCase {
	cases := []benchCase{
		{Name: storeRow, Kind: "store", Messages: n},
		{Name: memFloorRow, Kind: "floor", Messages: n},
		{Name: handRow, Kind: "handwritten", BatchRows: 1000, Messages: n},
		{Name: eoRow, Kind: "pipeline", Example: "counter", Messages: n},
		{Name: "at_least_once_consistent", Kind: "pipeline", Example: "counter-alo", Messages: n},
		{Name: "swift chain", Kind: "pipeline", Example: "swift-chain", Messages: n},
		{Name: "AsyncQueueSink", Kind: "pipeline", Example: "counter-async", Messages: n},
		{Name: "at_most_once_strategy", Kind: "pipeline", Example: "counter-async", AtMostOnce: true, Messages: n},
	}
	sweepBatch := []int{100, 1000, 10000}
	sweepParts := []int{1, 4, 8}
	if quick {
		sweepBatch, sweepParts = []int{100, 10000}, []int{1, 8}
	}
	for _, b := range sweepBatch {
		cases = append(cases, benchCase{Name: fmt.Sprintf("exactly_once, batch %d", b), Kind: "pipeline", Example: "counter", BatchRows: b, Messages: n})
	}
	cases = append(cases, benchCase{Name: "hand-written loop, batch 10000", Kind: "handwritten", BatchRows: 10000, Messages: n})
	for _, p := range sweepParts {
		cases = append(cases, benchCase{Name: fmt.Sprintf("exactly_once, %d partitions", p), Kind: "pipeline", Example: "counter", Partitions: p, Messages: n})
	}
	cases = append(cases, parquetBenchCases(n, quick)...)
	for _, b := range kafkaBrokers {
		cases = append(cases,
			benchCase{Name: kafkaRowName(b, kafkaWeirRow), Kind: "kafka", Example: "kafka", Broker: b, Messages: n},
			benchCase{Name: kafkaRowName(b, kafkaHandRow), Kind: "kafka-handwritten", BatchRows: 1000, Broker: b, Messages: n},
		)
	}
	return cases
}

// runBenchChild runs case c in a child process of bin ('bin bench --one')
// and adds the child's CPU time and peak RSS to its result. A Kafka case
// gets a fresh broker (kfake, or Apache Kafka's JVM) in another child
// process of self, started first and stopped after: not a child of the
// case's process, so not in its figures; its CPU (from its readiness to its
// stop) and peak RSS are reported apart.
func runBenchChild(self, bin string, c benchCase) benchResult {
	var stopBroker func() (*syscall.Rusage, time.Duration, error)
	if isKafkaCase(c) {
		addrs, stop, err := startBenchBroker(self, caseBroker(c))
		if err != nil {
			return benchResult{Case: c, Err: err.Error()}
		}
		c.Brokers, stopBroker = addrs, stop
	}
	b, _ := json.Marshal(c)
	cmd := exec.Command(bin, "bench", "--one", string(b))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var r benchResult
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		r = benchResult{Case: c, Err: fmt.Sprintf("%v: %s", err, strings.TrimSpace(errb.String()))}
	}
	cpu, rss := processUsage(cmd.ProcessState)
	if r.CPUScope != "run" && c.Messages > 0 {
		r.CPUPerMillion, r.CPUScope = cpu.Seconds()/float64(c.Messages)*1e6, "process"
	}
	if r.PeakRSSMiB == 0 { // the case did not measure its timed part's own peak
		r.PeakRSSMiB = rss
	}
	if stopBroker != nil {
		ru, startup, err := stopBroker()
		if err != nil && r.Err == "" {
			r.Err = err.Error()
		}
		if ru != nil && c.Messages > 0 {
			cpu := time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) - startup
			r.BrokerCPUPerMillion = max(cpu, 0).Seconds() / float64(c.Messages) * 1e6
			r.BrokerRSSMiB = float64(ru.Maxrss) / 1024
		}
	}
	return r
}

// benchClock times the measured part of a case: wall time and the CPU time
// of the whole process (all threads: Pebble's background work included)
// from start to stop, so that generating and writing the input, opening
// the store and checking the output stay out of the figures.
type benchClock struct {
	wall  time.Time
	cpu   time.Duration
	alloc uint64 // runtime.MemStats.TotalAlloc at the start
	// rss: the peak RSS was reset at the start (resetPeakRSS), so stop
	// records the timed part's own peak.
	rss  bool
	anon *anonSampler
	// written is selfWritten at the start; hasWritten that it was read.
	written    int64
	hasWritten bool
}

func startBenchClock() benchClock {
	rss := resetPeakRSS()
	written, ok := selfWritten()
	return benchClock{wall: time.Now(), cpu: selfCPU(), alloc: totalAlloc(), rss: rss, anon: startAnonSampler(), written: written, hasWritten: ok}
}

// stop records the rate and CPU per million messages of the timed part.
func (c benchClock) stop(res *benchResult, messages int) {
	wall, cpu := time.Since(c.wall), selfCPU()-c.cpu
	res.MsgsPerSec = float64(messages) / wall.Seconds()
	if messages > 0 {
		res.CPUPerMillion, res.CPUScope = cpu.Seconds()/float64(messages)*1e6, "run"
		res.AllocBytesMsg = float64(totalAlloc()-c.alloc) / float64(messages)
		if w, ok := selfWritten(); ok && c.hasWritten {
			res.WrittenBytesMsg = float64(w-c.written) / float64(messages)
		}
	}
	if c.rss {
		res.PeakRSSMiB = peakRSSMiB()
	}
	res.PeakAnonMiB = c.anon.stop()
}

// selfCPU is this process's CPU time so far (user + system, all threads).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processUsage returns a finished process's CPU time (user + system) and peak RSS
// in MiB.
func processUsage(ps *os.ProcessState) (time.Duration, float64) {
	if ps == nil {
		return 0, 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), float64(ru.Maxrss) / 1024
}

// benchKey names the runs of one row with one binary (0: this one, 1: the
// baseline).
type benchKey struct {
	bin  int
	name string
}

// benchTable collects a bench invocation's runs and prints the medians.
type benchTable struct {
	bins  []string
	order []benchCase
	runs  map[benchKey][]benchResult
}

// add appends c to the table's rows once.
func (t *benchTable) add(c benchCase) {
	for _, o := range t.order {
		if o.Name == c.Name {
			return
		}
	}
	t.order = append(t.order, c)
}

// median returns the row's result with each measured column the median of
// its runs (a run that failed makes the row failed, with its error).
func (t *benchTable) median(bin int, name string) benchResult {
	rs := t.runs[benchKey{bin, name}]
	if len(rs) == 0 {
		return benchResult{}
	}
	out := rs[0]
	for _, r := range rs {
		if r.Err != "" {
			out.Err = r.Err
			return out
		}
	}
	col := func(f func(benchResult) float64) float64 {
		vs := make([]float64, len(rs))
		for i, r := range rs {
			vs[i] = f(r)
		}
		sort.Float64s(vs)
		if len(vs)%2 == 1 {
			return vs[len(vs)/2]
		}
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	out.MsgsPerSec = col(func(r benchResult) float64 { return r.MsgsPerSec })
	out.P50 = col(func(r benchResult) float64 { return r.P50 })
	out.P99 = col(func(r benchResult) float64 { return r.P99 })
	out.CPUPerMillion = col(func(r benchResult) float64 { return r.CPUPerMillion })
	for _, r := range rs {
		if r.CPUScope == "process" {
			out.CPUScope = "process"
		}
	}
	out.PeakRSSMiB = col(func(r benchResult) float64 { return r.PeakRSSMiB })
	out.PeakAnonMiB = col(func(r benchResult) float64 { return r.PeakAnonMiB })
	out.StoreBytesMsg = col(func(r benchResult) float64 { return r.StoreBytesMsg })
	out.WrittenBytesMsg = col(func(r benchResult) float64 { return r.WrittenBytesMsg })
	out.AllocBytesMsg = col(func(r benchResult) float64 { return r.AllocBytesMsg })
	out.BrokerCPUPerMillion = col(func(r benchResult) float64 { return r.BrokerCPUPerMillion })
	out.BrokerRSSMiB = col(func(r benchResult) float64 { return r.BrokerRSSMiB })
	return out
}

// print writes the table: per row (and binary) the medians, and the ratios
// of its rate to exactly_once, to the comparator of its kind (the
// hand-written loop; the franz-go loop on the same broker for Kafka rows)
// and to the two floors, all of the same binary; then the Kafka rows'
// brokers and, for rows run on both brokers, Apache Kafka's figures over
// kfake's.
func (t *benchTable) print(w io.Writer) {
	runs := 0
	for _, rs := range t.runs {
		runs = max(runs, len(rs))
	}
	nw := 52
	for _, c := range t.order {
		l := utf8.RuneCountInString(c.Name)
		if len(t.bins) > 1 {
			l += len(" [baseline]")
		}
		nw = max(nw, l)
	}
	fmt.Fprintf(w, "\nmedians of %d run(s) per row\n", runs)
	fmt.Fprintf(w, "%-*s %10s %7s %7s %7s %7s %7s %7s %9s %8s %9s %10s %11s %11s\n",
		nw, "case", "msg/s", "vs EO", "vs hand", "vs mem", "vs store", "p50 ms", "p99 ms", "CPU s/1M", "RSS MiB", "anon MiB", "store B/msg", "wrote B/msg", "alloc B/msg")
	ratio := func(v, ref float64) string {
		if v <= 0 || ref <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", v/ref)
	}
	lat := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	var kafkaNotes, realNotes []string
	processCPU := false
	for _, c := range t.order {
		for b := range t.bins {
			r := t.median(b, c.Name)
			if len(t.runs[benchKey{b, c.Name}]) == 0 {
				continue
			}
			name := c.Name
			if b > 0 {
				name += " [baseline]"
			}
			if r.Err != "" {
				fmt.Fprintf(w, "%-*s FAILED: %s\n", nw, name, r.Err)
				continue
			}
			if c.Kind == "recovery" {
				// Only the latency columns mean something: the kills'
				// recovery times (the work runs in child processes).
				fmt.Fprintf(w, "%-*s %10s %7s %7s %7s %7s %7s %7s %9s %8s %9s %10s %11s %11s\n", nw, name, "-", "-", "-", "-", "-", lat(r.P50), lat(r.P99), "-", "-", "-", "-", "-", "-")
				continue
			}
			hand := handRow
			if isKafkaCase(c) {
				hand = kafkaRowName(caseBroker(c), kafkaHandRow)
				kafkaNotes = append(kafkaNotes, fmt.Sprintf("  %s: broker %.2f CPU s/1M, %.0f MiB peak RSS", name, r.BrokerCPUPerMillion, r.BrokerRSSMiB))
				if caseBroker(c) == brokerKafka {
					if k := t.median(b, kafkaTwin(c.Name)); len(t.runs[benchKey{b, kafkaTwin(c.Name)}]) > 0 && k.Err == "" {
						realNotes = append(realNotes, fmt.Sprintf("  %s: msg/s %s, CPU s/1M %s, peak RSS %s", name,
							ratio(r.MsgsPerSec, k.MsgsPerSec), ratio(r.CPUPerMillion, k.CPUPerMillion), ratio(r.PeakRSSMiB, k.PeakRSSMiB)))
					}
				}
			}
			ref := func(row string) float64 { return t.median(b, row).MsgsPerSec }
			cpu := fmt.Sprintf("%.2f", r.CPUPerMillion)
			if r.CPUScope == "process" {
				cpu += "*"
				processCPU = true
			}
			alloc := "-"
			if r.AllocBytesMsg > 0 {
				alloc = fmt.Sprintf("%.0f", r.AllocBytesMsg)
			}
			anon := "-"
			if r.PeakAnonMiB > 0 {
				anon = fmt.Sprintf("%.0f", r.PeakAnonMiB)
			}
			wrote := "-"
			if r.WrittenBytesMsg > 0 {
				wrote = fmt.Sprintf("%.0f", r.WrittenBytesMsg)
			}
			fmt.Fprintf(w, "%-*s %10.0f %7s %7s %7s %7s %7s %7s %9s %8.0f %9s %10.1f %11s %11s\n", nw, name, r.MsgsPerSec,
				ratio(r.MsgsPerSec, ref(eoRow)), ratio(r.MsgsPerSec, ref(hand)), ratio(r.MsgsPerSec, ref(memFloorRow)), ratio(r.MsgsPerSec, ref(storeRow)),
				lat(r.P50), lat(r.P99), cpu, r.PeakRSSMiB, anon, r.StoreBytesMsg, wrote, alloc)
		}
	}
	if f := t.median(0, flinkRow); len(t.runs[benchKey{0, flinkRow}]) > 0 && f.Err == "" {
		if eo := t.median(0, eoRow); len(t.runs[benchKey{0, eoRow}]) > 0 && eo.Err == "" {
			fmt.Fprintf(w, "\n%s over Flink (same events, this sitting): msg/s %s, CPU s/1M %s, peak RSS %s\n", eoRow,
				ratio(eo.MsgsPerSec, f.MsgsPerSec), ratio(eo.CPUPerMillion, f.CPUPerMillion), ratio(eo.PeakRSSMiB, f.PeakRSSMiB))
		}
	}
	if processCPU {
		fmt.Fprintln(w, "\n* CPU of the whole child process, input generation included (a binary that does not time its runs' CPU).")
	}
	if len(kafkaNotes) > 0 {
		fmt.Fprintln(w, "\nThe broker of each Kafka row ran in a process of its own (not in the row's figures; CPU from its readiness to its stop):")
		for _, n := range kafkaNotes {
			fmt.Fprintln(w, n)
		}
	}
	if len(realNotes) > 0 {
		fmt.Fprintf(w, "\nApache Kafka %s over kfake (the same row on each, same binary):\n", kafkabroker.Version)
		for _, n := range realNotes {
			fmt.Fprintln(w, n)
		}
	}
}

// kafkaTwin is the name of the kfake row of the Apache Kafka row name.
func kafkaTwin(name string) string {
	return strings.Replace(name, "kafka ("+brokerLabel(brokerKafka)+")", "kafka ("+brokerLabel(brokerKfake)+")", 1)
}

// benchRow is the generated event: ~100 bytes encoded.
func benchRow(r *rand.Rand, i int) weir.Row {
	return weir.Row{"key": fmt.Sprintf("user-%05d", r.IntN(10000)), "page": "/catalog/item/" + fmt.Sprint(r.IntN(100000)),
		"ms": int64(1_700_000_000_000 + i), "ref": "campaign-x"}
}

func runBenchCase(o *Options, c benchCase) benchResult {
	res := benchResult{Case: c}
	defer stopAnonSampler() // a case that failed before its clock stopped
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
	case "handwritten":
		err = benchHandwritten(dir, c, &res)
	case "kafka":
		err = benchKafka(o, dir, c, &res)
	case "kafka-handwritten":
		err = benchKafkaHandwritten(dir, c, &res)
	case "parquet":
		err = benchParquet(o, dir, c, &res)
	case "parquet-floor":
		err = benchParquetFloor(dir, c, &res)
	case "flink":
		err = benchFlink(dir, c, &res)
	default:
		err = fmt.Errorf("unknown bench kind %q", c.Kind)
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.StoreBytesMsg = float64(dirSize(dir)) / float64(max(c.Messages, 1))
	if c.Kind == "floor" || c.Kind == "recovery" || c.Kind == "flink" {
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
	clk := startBenchClock()
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
	clk.stop(res, c.Messages)
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
	clk := startBenchClock()
	for _, b := range in {
		row, _, err := codec.DecodeRow(b)
		if err != nil {
			return err
		}
		k := row["key"].(string)
		counts[k]++
		out, _ = codec.AppendRow(out[:0], weir.Row{"key": k, "count": counts[k]})
	}
	clk.stop(res, c.Messages)
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

// benchSpec is c's pipeline spec (an example, or the Swift chain) with the
// case's batch size, partition count and at-most-once strategy, and short
// idle waits (1 ms empty-batch backoff, 10 ms scheduler period) so that a
// row measures processing rather than polling.
func benchSpec(c benchCase) (*spec.Pipeline, error) {
	var specBytes []byte
	var err error
	if c.Example == "swift-chain" {
		specBytes = []byte(swiftChainSpec)
	} else if specBytes, err = examples.Spec(c.Example); err != nil {
		return nil, err
	}
	p, err := spec.ParseYSON(specBytes)
	if err != nil {
		return nil, err
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
	return p, nil
}

// benchQueues creates the input queue "events" (c.Partitions partitions,
// default 4) and the output queue "counts" (4 partitions) in st.
// inputPartitions is the number of partitions of the case's input (4 by
// default): the input queue's, or the Flink row's input files.
func (c benchCase) inputPartitions() int { return cmp.Or(c.Partitions, 4) }

func benchQueues(ctx context.Context, st store.Store, c benchCase) (in, out *queue.Queue, err error) {
	if in, err = queue.Create(ctx, st, "events", c.inputPartitions()); err != nil {
		return nil, nil, err
	}
	if out, err = queue.Create(ctx, st, "counts", 4); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// benchEvents calls emit with the n generated events, in chunks of 10,000,
// each row with its partition among parts (split by the hash of "key", as
// weir splits keyed rows). Every row and every process sees the same events.
func benchEvents(n, parts int, emit func(rows []weir.Row, ps []int) error) error {
	r := rand.New(rand.NewPCG(1, 1))
	const chunk = 10000
	for i := 0; i < n; i += chunk {
		var rows []weir.Row
		var ps []int
		for j := i; j < min(i+chunk, n); j++ {
			row := benchRow(r, j)
			rows = append(rows, row)
			ps = append(ps, queue.PartitionOf(row, "key", parts, nil))
		}
		if err := emit(rows, ps); err != nil {
			return err
		}
	}
	return nil
}

// benchRunEngine runs p on st until it completes and records the rate of
// messages from the engine's start to completion.
func benchRunEngine(o *Options, st store.Store, p *spec.Pipeline, messages int, res *benchResult) error {
	ctx := context.Background()
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: o.Classes, Connectors: o.Connectors})
	if err != nil {
		return err
	}
	clk := startBenchClock()
	state, err := e.Run(ctx)
	if err != nil {
		return err
	}
	if state != controller.Completed {
		return fmt.Errorf("pipeline ended in %s", state)
	}
	clk.stop(res, messages)
	if cnt, ok := e.Status().Computations["Counter"]; ok && cnt.Inputs != uint64(messages) {
		return fmt.Errorf("the Counter processed %d messages, want %d", cnt.Inputs, messages)
	}
	return nil
}

// checkOutputs fails unless the queue holds exactly n rows: every row
// measured the whole work (a completed pipeline has delivered through its
// async sinks too).
func checkOutputs(ctx context.Context, out *queue.Queue, n int) error {
	var total uint64
	for p := 0; p < out.Partitions(); p++ {
		l, err := out.Len(ctx, p)
		if err != nil {
			return err
		}
		total += l
	}
	if total != uint64(n) {
		return fmt.Errorf("the output queue holds %d rows, want %d", total, n)
	}
	return nil
}

func benchPipeline(o *Options, dir string, c benchCase, res *benchResult) error {
	p, err := benchSpec(c)
	if err != nil {
		return err
	}
	return withBenchQueues(dir, c, c.Kind != "latency", func(ctx context.Context, st store.Store, in, out *queue.Queue) error {
		if c.Kind == "latency" {
			p.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = false
			return benchLatency(o, st, p, in, out, c, res)
		}
		if err := benchRunEngine(o, st, p, c.Messages, res); err != nil {
			return err
		}
		return checkOutputs(ctx, out, c.Messages)
	})
}

// withBenchQueues opens a store in dir, creates the bench's queues in it
// (benchQueues), writes the events to the input queue if write, and runs
// fn.
func withBenchQueues(dir string, c benchCase, write bool, fn func(ctx context.Context, st store.Store, in, out *queue.Queue) error) error {
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	in, out, err := benchQueues(ctx, st, c)
	if err != nil {
		return err
	}
	if write {
		if err := benchEvents(c.Messages, in.Partitions(), func(rows []weir.Row, ps []int) error { return in.Write(ctx, rows, ps) }); err != nil {
			return err
		}
	}
	return fn(ctx, st, in, out)
}

// benchHandwritten runs the hand-written exactly-once loop
// (handwritten.QueueCounter) over the same queues and events as the
// pipeline rows, batch c.BatchRows, from its start to its end.
func benchHandwritten(dir string, c benchCase, res *benchResult) error {
	return withBenchQueues(dir, c, true, func(ctx context.Context, st store.Store, in, out *queue.Queue) error {
		if err := timeHandwritten(c, res, func() (int, error) {
			return handwritten.QueueCounter{Store: st, In: in, Out: out, Batch: c.BatchRows}.Run(ctx)
		}); err != nil {
			return err
		}
		return checkOutputs(ctx, out, c.Messages)
	})
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
	// The writer below and the poller (this goroutine) share written (mu);
	// lat and next are the poller's. Times are durations since base: 8
	// bytes without a pointer each, so that the bench's own bookkeeping
	// (an entry per event) adds little to the row's memory and nothing to
	// the garbage collector's marking.
	var mu sync.Mutex
	base := time.Now()
	written := map[string][]time.Duration{}
	lat := make([]float64, 0, c.Messages)
	next := map[int]uint64{}
	poll := func() error {
		for part := 0; part < out.Partitions(); part++ {
			rows, err := out.Read(ctx, part, next[part], 0)
			if err != nil {
				return err
			}
			now := time.Since(base)
			mu.Lock()
			for _, row := range rows {
				k, _ := row.Row["key"].(string)
				n, _ := row.Row["count"].(int64)
				if ts := written[k]; int(n) >= 1 && int(n) <= len(ts) {
					lat = append(lat, float64(now-ts[n-1])/float64(time.Millisecond))
				}
				next[part] = row.Index + 1
			}
			mu.Unlock()
		}
		return nil
	}
	// The writer offers c.Rate events a second: every writeTick it writes,
	// in one commit, the events due since its last write. Writing and
	// polling run on their own goroutines, so that neither's store round
	// trips (a synced commit each write) hold back the other or cap the
	// offered rate; each event's latency runs from just before its commit.
	const writeTick = 5 * time.Millisecond
	clk := startBenchClock()
	wrote := make(chan error, 1)
	go func() {
		tick := time.NewTicker(writeTick)
		defer tick.Stop()
		start := time.Now()
		sent := 0
		for sent < c.Messages {
			<-tick.C
			due := min(int(c.Rate*time.Since(start).Seconds()), c.Messages)
			var rows []weir.Row
			var ps []int
			now := time.Since(base)
			mu.Lock()
			for ; sent < due; sent++ {
				row := benchRow(r, sent)
				rows = append(rows, row)
				ps = append(ps, queue.PartitionOf(row, "key", in.Partitions(), nil))
				k := row["key"].(string)
				written[k] = append(written[k], now)
			}
			mu.Unlock()
			if len(rows) == 0 {
				continue
			}
			if err := in.Write(ctx, rows, ps); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	// Poll every millisecond until every output arrived, or 30 s after the
	// last write.
	writing, deadline := (<-chan error)(wrote), (<-chan time.Time)(nil)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for len(lat) < c.Messages {
		select {
		case err := <-writing:
			if err != nil {
				return err
			}
			writing, deadline = nil, time.After(30*time.Second)
		case <-deadline:
			return fmt.Errorf("only %d of %d outputs arrived", len(lat), c.Messages)
		case <-tick.C:
		}
		if err := poll(); err != nil {
			return err
		}
	}
	e.Controller().SetTarget(controller.Stopped)
	sort.Float64s(lat)
	res.P50 = lat[len(lat)/2]
	res.P99 = lat[len(lat)*99/100]
	clk.stop(res, c.Messages)
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

// writeHeapProfile writes the heap profile now: its alloc_space and
// alloc_objects samples are everything allocated since the process started.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
	// A kill lands 50–450 ms after a life starts serving; a run that
	// completes sooner (a small --quick input on a fast machine) measures
	// nothing, so it is run again with four times the events, up to three
	// times, each in a fresh directory.
	var r *chaos.ProcessResult
	events := c.Messages
	for attempt := 0; ; attempt++ {
		runDir := filepath.Join(dir, fmt.Sprintf("recovery-%d", attempt))
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return err
		}
		r = chaos.RunProcess(context.Background(), chaos.ProcessConfig{
			Bin: self, Dir: runDir, Example: c.Example, Events: events, Keys: 1000, Seed: 1,
			Kills: int(c.Rate), LeaseTimeout: 2 * time.Second,
		})
		if r.Failed() {
			return fmt.Errorf("recovery run: %s", strings.Join(r.Violations, "; "))
		}
		if len(r.KillRecovery) > 0 {
			break
		}
		if attempt == 2 {
			return fmt.Errorf("recovery run: no kill was measured (the runs of up to %d events completed before one landed)", events)
		}
		events *= 4
	}
	res.P50 = float64(chaos.Percentile(r.KillRecovery, .5)) / float64(time.Millisecond)
	res.P99 = float64(chaos.Percentile(r.KillRecovery, .99)) / float64(time.Millisecond)
	return nil
}
