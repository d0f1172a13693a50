package main

// The Kafka example through the real binary, against an in-process Kafka
// (kfake) on loopback: a sink whose progress marker is not its own stops
// 'weir run' loudly, with the reason and what to do, instead of restarting
// its job forever.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaSpec writes the Kafka example with brokers set to the cluster's
// address and returns its path.
func kafkaSpec(t *testing.T, c interface{ ListenAddrs() []string }) string {
	t.Helper()
	b, err := os.ReadFile(exampleSpec("kafka"))
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, a := range c.ListenAddrs() {
		addrs = append(addrs, fmt.Sprintf("%q", a))
	}
	b = bytes.ReplaceAll(b, []byte(`["localhost:9092"]`), []byte("["+strings.Join(addrs, "; ")+"]"))
	spec := filepath.Join(t.TempDir(), "kafka.yson")
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

func produce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"key":"k%d","i":%d}`, i%5, i))}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKafkaMarkerLostStopsRun: after a clean stop, the sink's progress
// marker (a committed offset of its group) is overwritten by someone else.
// The next 'weir run' must exit non-zero within a bounded time, printing
// why and what to do (allow_missing_progress_marker) without -v.
func TestKafkaMarkerLostStopsRun(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "page-views", "page-view-counts"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	produce(t, cl, "page-views", 0, 20)

	dir := t.TempDir()
	spec := kafkaSpec(t, c)
	run := startRun(t, dir, spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var group string
	for group == "" { // the sink's marker group appears with its first transaction
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, "weir-") && g != "weir-page-view-counter" {
				offs, err := adm.FetchOffsets(ctx, g)
				if err == nil {
					if o, ok := offs.Lookup("page-view-counts", 0); ok && o.At > 0 {
						group = g
					}
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no marker group appeared\n%s", run.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := run.wait(t); err != nil {
		t.Fatalf("stop: %v\n%s", err, run.stderr.String())
	}

	// Someone else's commit replaces the marker.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "page-view-counts", Partition: 0, At: 3, Metadata: "not weir's"})
	if _, err := adm.CommitOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "page-views", 20, 5)

	out, err := runToEnd(t, dir, spec)
	if err == nil {
		t.Fatalf("weir run with a foreign progress marker exited 0:\n%s", out)
	}
	for _, want := range []string{"progress marker of consumer group " + fmt.Sprintf("%q", group), "is not this sink's",
		"allow_missing_progress_marker", "the pipeline was stopped", "Restarting would fail the same way"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}
