package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchTableMedians: a row reports each column's median over its runs
// (even counts average the middle two), a failed run fails the row, and
// the ratios are to exactly_once, to the comparator of the row's kind and
// to the floors of the same binary; CPU that covers a whole child process
// (not only the timed run) is marked.
func TestBenchTableMedians(t *testing.T) {
	tb := &benchTable{bins: []string{"new", "old"}, runs: map[benchKey][]benchResult{}}
	add := func(bin int, c benchCase, rates ...float64) {
		tb.add(c)
		for i, r := range rates {
			tb.runs[benchKey{bin, c.Name}] = append(tb.runs[benchKey{bin, c.Name}], benchResult{Case: c, MsgsPerSec: r, CPUPerMillion: float64(10 + i)})
		}
	}
	cases := benchCases(100, true)
	byName := map[string]benchCase{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	add(0, byName[storeRow], 200)
	add(0, byName[memFloorRow], 1000)
	add(0, byName[handRow], 500, 100, 400)  // median 400
	add(0, byName[eoRow], 50, 150, 100, 90) // median (90+100)/2 = 95
	add(0, byName[kafkaHandRow], 80)
	add(0, byName["kafka: weir (KafkaSource → Counter → KafkaSink)"], 40)
	add(1, byName[eoRow], 60)
	tb.runs[benchKey{1, eoRow}][0].CPUScope = "process"
	failed := byName["swift chain"]
	add(0, failed, 10, 20)
	tb.runs[benchKey{0, failed.Name}][1].Err = "pipeline ended in stopped"

	if m := tb.median(0, handRow); m.MsgsPerSec != 400 || m.CPUPerMillion != 11 {
		t.Fatalf("hand-written median: %.0f msg/s, %.0f CPU, want 400 and 11", m.MsgsPerSec, m.CPUPerMillion)
	}
	if m := tb.median(0, eoRow); m.MsgsPerSec != 95 {
		t.Fatalf("exactly_once median: %.1f, want 95", m.MsgsPerSec)
	}
	if m := tb.median(0, failed.Name); m.Err == "" {
		t.Fatal("a row with a failed run is not failed")
	}
	var out bytes.Buffer
	tb.print(&out)
	text := out.String()
	row := func(name string) []string {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, name+" ") {
				return strings.Fields(strings.TrimPrefix(l, name))
			}
		}
		t.Fatalf("no row %q in\n%s", name, text)
		return nil
	}
	// msg/s, vs EO, vs hand, vs mem, vs store
	if got, want := strings.Join(row(eoRow)[:5], " "), "95 1.00x 0.24x 0.10x 0.47x"; got != want {
		t.Errorf("exactly_once row: %s, want %s", got, want)
	}
	if got, want := strings.Join(row("kafka: weir (KafkaSource → Counter → KafkaSink)")[:5], " "), "40 0.42x 0.50x 0.04x 0.20x"; got != want {
		t.Errorf("kafka row (compared with the franz-go loop): %s, want %s", got, want)
	}
	if got, want := strings.Join(row(eoRow + " [baseline]")[:3], " "), "60 1.00x -"; got != want {
		t.Errorf("baseline row (ratios to the baseline's own rows): %s, want %s", got, want)
	}
	if !strings.Contains(text, failed.Name+" ") || !strings.Contains(text, "FAILED: pipeline ended in stopped") {
		t.Errorf("the failed row is not shown as failed:\n%s", text)
	}
	if got := row(eoRow + " [baseline]")[7]; got != "10.00*" || !strings.Contains(text, "* CPU of the whole child process") {
		t.Errorf("a row whose CPU covers the whole process is not marked: %q\n%s", got, text)
	}
	if !strings.Contains(text, "medians of 4 run(s)") {
		t.Errorf("the table does not say how many runs it summarizes:\n%s", text)
	}
}
