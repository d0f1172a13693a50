// Command profconcern groups the samples of a CPU or allocation profile of
// a 'weir bench --one' case by concern (row decoding, dedup, outbox, state,
// store commit, Pebble compactions, transport, GC, bookkeeping, …) and
// prints a markdown table: how much of the measured run each concern
// costs, and how much of that is allocation.
//
//	weir bench --one '{"name":"eo","kind":"pipeline","example":"counter","messages":300000}' \
//	    --cpuprofile eo.prof --allocprofile eo.alloc
//	go tool pprof -traces weir eo.prof | go run ./internal/tools/profconcern
//	go tool pprof -traces -sample_index=alloc_space weir eo.alloc | go run ./internal/tools/profconcern
//	go tool pprof -traces -sample_index=alloc_objects weir eo.alloc | go run ./internal/tools/profconcern
//
// A sample belongs to the first concern whose pattern matches one of its
// frames, searching from the leaf (the function running) to the root, after
// three whole-stack rules: writing the bench's input before the clock
// starts (reported apart, not in the percentages), garbage collection (mark
// workers, assists, sweeping, write barriers) and Pebble's background
// flushes and compactions. Allocation inside a concern's code (mallocgc)
// counts to that concern and is also shown in its own column.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// concern is a named group of functions.
type concern struct {
	name    string
	pattern *regexp.Regexp
}

const weirPkg = `github\.com/weir-stream/weir/`

// Whole-stack rules, in order.
var (
	setupRule    = concern{"setup: writing the input before the clock and checking the output after it (excluded)", regexp.MustCompile(`/cli\.(benchEvents|writeParquetInput|checkParquetOutput|checkOutputs)$`)}
	gcRule       = concern{"GC: mark workers, assists, sweeping, write barriers", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcAssistAlloc|gcDrain|markroot|bgsweep|bgscavenge|sweepone|wbBufFlush|scanobject|scanObject)|^gcWriteBarrier`)}
	pebbleBgRule = concern{"Pebble: background flushes and compactions", regexp.MustCompile(`pebble/v2\.\(\*DB\)\.(flush|compact1|runCompaction|maybeScheduleFlush)`)}
)

// leafRules are searched from the leaf frame to the root.
var leafRules = []concern{
	{"row decoding (codec.DecodeRow)", regexp.MustCompile(weirPkg + `internal/codec\.(DecodeRow|\(\*rowDecoder\)|takeUvarint)`)},
	{"row encoding (codec.AppendRow)", regexp.MustCompile(weirPkg + `internal/codec\.(AppendRow|appendEntries|appendValue|AppendString|sortEntries|scanEntries|entry)`)},
	{"keys and routing (group_by key, partition hash)", regexp.MustCompile(weirPkg + `(internal/codec\.(AppendKey|appendKey|Hash64)|(?:runtime|plan)\.\(\*CompPlan\)\.KeyOf|connector/queue\.PartitionOf|(?:runtime|job)\.\(\*Job\)\.destinations)`)},
	{"store commit (batch build, memtable insert, WAL, fsync)", regexp.MustCompile(weirPkg + `store/pebble\.\(\*Store\)\.(Commit|apply|appendRows|evalChecks|lockSequences)|pebble/v2/record\.\(\*LogWriter\)|pebble/v2/wal\.`)},
	{"store reads (point reads, scans)", regexp.MustCompile(weirPkg + `store/pebble\.\(\*Store\)\.(Scan|Get|get)`)},
	{"dedup (input ids: filter, register)", regexp.MustCompile(weirPkg + `(?:runtime|job)\.(\(\*inputStore\)|dedupKey|appendIDHash|applied|\(\*appliedLog\))`)},
	{"outbox (output rows, erase on ack)", regexp.MustCompile(weirPkg + `(?:runtime|job)\.\(\*outbox\)`)},
	{"state (load, cache, sync)", regexp.MustCompile(weirPkg + `(?:runtime|job)\.(\(\*stateManager\)|stateKey|stateRef|\(\*callContext\)\.(LoadState|SaveState))`)},
	{"user code (Counter, Passthrough)", regexp.MustCompile(weirPkg + `builtin\.`)},
	{"Swift lineage and source acks", regexp.MustCompile(weirPkg + `(?:runtime|job)\.(\(\*swiftTracker\)|\(\*minTracker\)|\(\*sourceReader\)\.(markDone|sync)|\(\*Job\)\.flushSwift)`)},
	{"transport (offers, mailboxes, acks)", regexp.MustCompile(weirPkg + `transport\.`)},
	{"source read (queue scan, records → messages)", regexp.MustCompile(weirPkg + `((?:runtime|job)\.\(\*sourceReader\)|connector/queue\.\(\*sourcePartition\)|connector/queue\.\(\*Queue\)\.Read)`)},
	{"sink (SyncQueueSink: rows into the epoch's txn)", regexp.MustCompile(weirPkg + `(connector\.\(\*SyncSink\)|connector/queue\.(syncWriter|\(\*Queue\)\.Append|checkUserColumns))`)},
	{"static table sink (spool, publish, Parquet encoding)", regexp.MustCompile(weirPkg + `connector/statictable\.(\(\*Sink\)|writeParquet|nextSpooled|colConv|rowWeight|\(\*local(Dir|Temp)\))`)},
	{"static table source (Parquet decoding, rows)", regexp.MustCompile(weirPkg + `connector/statictable\.(\(\*sourcePartition\)|\(\*parquetReader\)|\(\*columnReader\))`)},
	{"message ids and output materialization", regexp.MustCompile(weirPkg + `(msgid\.|(?:runtime|job)\.\(\*Job\)\.materialize|(?:runtime|job)\.inheritMeta)`)},
	{"grouping and user-code calls (process, collector)", regexp.MustCompile(weirPkg + `(?:runtime|job)\.(\(\*collector\)|\(\*Job\)\.process)`)},
	{"job bookkeeping (epoch loop, fetch, offers, reports, counters)", regexp.MustCompile(weirPkg + `(?:runtime|job)\.`)},
	{"controller and workers", regexp.MustCompile(weirPkg + `controller\.`)},
	{"hand-written loop (internal/handwritten)", regexp.MustCompile(weirPkg + `internal/handwritten\.`)},
}

// fallbackRules apply, leaf first, to stacks no leaf rule matched.
var fallbackRules = []concern{
	{"Pebble (other)", regexp.MustCompile(`cockroachdb/pebble`)},
}

const otherName = "Go runtime: scheduler, syscalls, other"

// sample is one stack of the profile with its value (ns or bytes).
type sample struct {
	value  float64
	frames []string // leaf first
}

func main() {
	samples, unit, err := parseTraces(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profconcern:", err)
		os.Exit(1)
	}
	if len(samples) == 0 {
		fmt.Fprintln(os.Stderr, "profconcern: no samples on stdin (pipe 'go tool pprof -traces BINARY PROFILE' in)")
		os.Exit(1)
	}
	report(os.Stdout, samples, unit)
}

// classify returns the concern of a stack.
func classify(frames []string) string {
	for _, r := range []concern{setupRule, gcRule, pebbleBgRule} {
		for _, f := range frames {
			if r.pattern.MatchString(f) {
				return r.name
			}
		}
	}
	for _, rules := range [][]concern{leafRules, fallbackRules} {
		for _, f := range frames {
			for _, r := range rules {
				if r.pattern.MatchString(f) {
					return r.name
				}
			}
		}
	}
	return otherName
}

// allocating reports whether the stack is in the allocator.
func allocating(frames []string) bool {
	for _, f := range frames {
		if strings.HasPrefix(f, "runtime.mallocgc") || f == "runtime.newobject" || f == "runtime.growslice" || strings.HasPrefix(f, "runtime.makeslice") || strings.HasPrefix(f, "runtime.makemap") {
			return true
		}
	}
	return false
}

func report(w io.Writer, samples []sample, unit string) {
	total, measured := 0.0, 0.0
	by, alloc := map[string]float64{}, map[string]float64{}
	for _, s := range samples {
		c := classify(s.frames)
		by[c] += s.value
		total += s.value
		if c != setupRule.name {
			measured += s.value
		}
		if allocating(s.frames) {
			alloc[c] += s.value
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		if n != setupRule.name {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	// For CPU, a column says how much of each concern's time is spent in
	// the allocator; an allocation profile is all allocation.
	cpu := unit == "CPU s"
	row := func(name, value, share, inAlloc string) {
		if cpu {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, value, share, inAlloc)
		} else {
			fmt.Fprintf(w, "| %s | %s | %s |\n", name, value, share)
		}
	}
	if cpu {
		fmt.Fprintf(w, "| concern | %s | %% of the run | of which in the allocator |\n|---|---:|---:|---:|\n", unit)
	} else {
		head := unit + " allocated"
		if unit == "allocations" {
			head = "allocations"
		}
		fmt.Fprintf(w, "| concern | %s | %% of the run |\n|---|---:|---:|\n", head)
	}
	for _, n := range names {
		row(n, format(by[n], unit), fmt.Sprintf("%.1f%%", 100*by[n]/measured), pct(alloc[n], by[n]))
	}
	row("**the run (setup excluded)**", format(measured, unit), "100%", pct(sumValues(alloc)-alloc[setupRule.name], measured))
	if v := by[setupRule.name]; v > 0 {
		fmt.Fprintf(w, "\n%s: %s (%.1f%% of the profile).\n", setupRule.name, format(v, unit), 100*v/total)
	}
}

func sumValues(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func pct(part, whole float64) string {
	if whole == 0 || part == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

func format(v float64, unit string) string {
	switch unit {
	case "CPU s":
		return fmt.Sprintf("%.2f", v/1e9)
	case "MiB":
		return fmt.Sprintf("%.0f", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// parseTraces reads 'go tool pprof -traces' output: blocks separated by
// "-----------+---…" lines; in each, optional label lines ("bytes: 32B"),
// then "VALUE  leaf-frame" and one frame per line up to the root. unit is
// "CPU s" for time values, "MiB" for sizes and "allocations" for counts.
func parseTraces(r io.Reader) ([]sample, string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var out []sample
	var cur *sample
	unit := ""
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			cur = nil
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if cur == nil {
			if len(f) < 2 || strings.HasSuffix(f[0], ":") {
				continue // header or label line
			}
			v, u, err := parseValue(f[0])
			if err != nil {
				continue // header lines ("Duration: …") and the like
			}
			if unit == "" && u != "" {
				unit = u
			}
			out = append(out, sample{value: v})
			cur = &out[len(out)-1]
			cur.frames = append(cur.frames, strings.Join(f[1:], " "))
			continue
		}
		cur.frames = append(cur.frames, strings.Join(f, " "))
	}
	return out, unit, sc.Err()
}

// parseValue parses "10ms", "1.20s", "512.02kB", "3MB", "4096", "0" into
// nanoseconds, bytes or a count (alloc_objects), with the unit's name ("" for
// a zero without a unit).
func parseValue(s string) (float64, string, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, suffix := s, ""
	if i >= 0 {
		num, suffix = s[:i], s[i:]
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, "", err
	}
	times := map[string]float64{"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "mins": 60e9, "hrs": 3600e9}
	sizes := map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
	if m, ok := times[suffix]; ok {
		return v * m, "CPU s", nil
	}
	if m, ok := sizes[suffix]; ok {
		return v * m, "MiB", nil
	}
	if suffix == "" {
		if v == 0 {
			return 0, "", nil // any unit
		}
		return v, "allocations", nil
	}
	return 0, "", fmt.Errorf("value %q: unknown unit", s)
}
