package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weir-stream/weir/internal/kafkabroker"
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
	cases := benchCases(100, true, []string{brokerKfake, brokerKafka})
	byName := map[string]benchCase{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	add(0, byName[storeRow], 200)
	add(0, byName[memFloorRow], 1000)
	add(0, byName[handRow], 500, 100, 400)  // median 400
	add(0, byName[eoRow], 50, 150, 100, 90) // median (90+100)/2 = 95
	kfakeWeir, kfakeHand := kafkaRowName(brokerKfake, kafkaWeirRow), kafkaRowName(brokerKfake, kafkaHandRow)
	realWeir, realHand := kafkaRowName(brokerKafka, kafkaWeirRow), kafkaRowName(brokerKafka, kafkaHandRow)
	add(0, byName[kfakeHand], 80)
	add(0, byName[kfakeWeir], 40)
	add(0, byName[realHand], 50)
	add(0, byName[realWeir], 20)
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
	if got, want := strings.Join(row(kfakeWeir)[:5], " "), "40 0.42x 0.50x 0.04x 0.20x"; got != want {
		t.Errorf("kafka row (compared with the franz-go loop): %s, want %s", got, want)
	}
	if got, want := strings.Join(row(realWeir)[:5], " "), "20 0.21x 0.40x 0.02x 0.10x"; got != want {
		t.Errorf("kafka row on Apache Kafka (compared with the franz-go loop on Apache Kafka): %s, want %s", got, want)
	}
	if want := "  " + realWeir + ": msg/s 0.50x, CPU s/1M 1.00x"; !strings.Contains(text, want) {
		t.Errorf("no line %q comparing the Apache Kafka row with its kfake twin:\n%s", want, text)
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

// TestBenchKafkaBrokers: the Kafka rows run on kfake unless --kafka-broker
// asks for a real broker (--quick included, so CI's smoke run needs no
// Java); real and both fail at once, naming the fetch command, when the
// jars are missing; both gives every Kafka row once per broker.
func TestBenchKafkaBrokers(t *testing.T) {
	t.Setenv("WEIR_KAFKA_LIBS", t.TempDir()) // no jars
	bs, err := parseKafkaBrokers("kfake")
	if err != nil || len(bs) != 1 || bs[0] != brokerKfake {
		t.Fatalf("kfake: %v, %v", bs, err)
	}
	for _, v := range []string{"real", "both"} {
		if _, err := parseKafkaBrokers(v); err == nil || !strings.Contains(err.Error(), kafkabroker.Jars.Fetcher) {
			t.Errorf("--kafka-broker %s without the jars: %v, want an error naming %q", v, err, kafkabroker.Jars.Fetcher)
		}
	}
	if _, err := parseKafkaBrokers("zookeeper"); err == nil {
		t.Error("--kafka-broker zookeeper accepted")
	}
	count := func(cases []benchCase) map[string]int {
		n := map[string]int{}
		for _, c := range cases {
			if isKafkaCase(c) {
				n[caseBroker(c)]++
			}
		}
		return n
	}
	if n := count(benchCases(100, true, []string{brokerKfake})); n[brokerKfake] != 2 || n[brokerKafka] != 0 {
		t.Errorf("default Kafka rows: %v, want 2 on kfake only", n)
	}
	if n := count(benchCases(100, false, []string{brokerKfake, brokerKafka})); n[brokerKfake] != 2 || n[brokerKafka] != 2 {
		t.Errorf("--kafka-broker both: %v, want 2 on each", n)
	}
	if got, want := kafkaTwin(kafkaRowName(brokerKafka, kafkaWeirRow)), kafkaRowName(brokerKfake, kafkaWeirRow); got != want {
		t.Errorf("twin of the Apache Kafka row: %q, want %q", got, want)
	}
}
