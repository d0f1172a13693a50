package main

import (
	"bytes"
	"strings"
	"testing"
)

// traces is a cut-down 'go tool pprof -traces' output of a CPU profile.
const traces = `File: weir
Type: cpu
Duration: 11.69s, Total samples = 9.59s (82.06%)
-----------+-------------------------------------------------------
      10ms   math/rand/v2.(*Rand).uint64n
             github.com/weir-stream/weir/cli.benchRow
             github.com/weir-stream/weir/cli.benchEvents
             main.main
-----------+-------------------------------------------------------
     30ms   runtime.mallocgc
             github.com/weir-stream/weir/internal/codec.(*rowDecoder).entries
             github.com/weir-stream/weir/internal/codec.DecodeRow
             github.com/weir-stream/weir/connector/queue.(*sourcePartition).Read
             github.com/weir-stream/weir/runtime.(*Job).Epoch
-----------+-------------------------------------------------------
     bytes:  32B
     1.2s   github.com/cockroachdb/pebble/v2/internal/arenaskl.(*Skiplist).findSpliceForLevel
             github.com/cockroachdb/pebble/v2.(*DB).Apply
             github.com/weir-stream/weir/store/pebble.(*Store).apply
             github.com/weir-stream/weir/store/pebble.(*Store).Commit
             github.com/weir-stream/weir/runtime.(*txManager).commit
-----------+-------------------------------------------------------
      20ms   runtime.tryDeferToSpanScan
             runtime.wbBufFlush1
             gcWriteBarrier
             github.com/weir-stream/weir/runtime.(*inputStore).filter
-----------+-------------------------------------------------------
      40ms   runtime.memmove
             github.com/cockroachdb/pebble/v2.(*DB).runCompaction
             github.com/cockroachdb/pebble/v2.(*DB).compact1
-----------+-------------------------------------------------------
      50ms   runtime.mapassign_faststr
             github.com/weir-stream/weir/runtime.(*inputStore).filter
             github.com/weir-stream/weir/runtime.(*Job).Epoch
-----------+-------------------------------------------------------
      60ms   runtime.futex
             runtime.schedule
`

// TestReport: samples go to the first concern matching from the leaf
// (after the setup, GC and background Pebble rules), the setup is kept
// out of the percentages, and allocation is counted per concern.
func TestReport(t *testing.T) {
	samples, unit, err := parseTraces(strings.NewReader(traces))
	if err != nil {
		t.Fatal(err)
	}
	if unit != "CPU s" || len(samples) != 7 {
		t.Fatalf("parsed %d samples in %q, want 7 in CPU s", len(samples), unit)
	}
	var out bytes.Buffer
	report(&out, samples, unit)
	text := out.String()
	for _, want := range []string{
		"| store commit (batch build, memtable insert, WAL, fsync) | 1.20 | 85.7% | - |",
		"| row decoding (codec.DecodeRow) | 0.03 | 2.1% | 100% |",
		"| GC: mark workers, assists, sweeping, write barriers | 0.02 | 1.4% | - |",
		"| Pebble: background flushes and compactions | 0.04 | 2.9% | - |",
		"| dedup (input ids: filter, register) | 0.05 | 3.6% | - |",
		"| " + otherName + " | 0.06 | 4.3% | - |",
		"| **the run (setup excluded)** | 1.40 | 100% | 2% |",
		"setup: writing the input before the clock and checking the output after it (excluded): 0.01",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// TestParseValue: pprof's units, and counts of alloc_objects.
func TestParseValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		v    float64
		unit string
	}{
		{"10ms", 1e7, "CPU s"}, {"1.5s", 1.5e9, "CPU s"}, {"512kB", 512 << 10, "MiB"}, {"2MB", 2 << 20, "MiB"},
		{"4096", 4096, "allocations"}, {"0", 0, ""},
	} {
		v, u, err := parseValue(c.in)
		if err != nil || v != c.v || u != c.unit {
			t.Errorf("parseValue(%q) = %v %q %v, want %v %q", c.in, v, u, err, c.v, c.unit)
		}
	}
	if _, _, err := parseValue("3parsecs"); err == nil {
		t.Error("an unknown unit parsed")
	}
}
