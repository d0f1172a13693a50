package main

// The Kafka example (examples/kafka: KafkaSource → Counter → KafkaSink)
// through the real binary on a real Apache Kafka broker: 'weir run' is
// SIGKILLed again and again while the input grows, partitions are added to
// the input topic (one set between runs, one while the last run runs), and
// the broker is stopped and restarted twice while 'weir run' runs (its
// SIGKILL mid-transaction is tested on three brokers in connector/kafka:
// a single node restarted after a SIGKILL can leave a hanging transaction,
// see connector/kafka's doc). Apache Kafka's own Java console
// consumer, at isolation.level=read_committed, must then read every key's
// counts 1..n exactly once, and the source's consumer group must stand at
// the end of every input partition.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir/internal/kafkabroker"
	"github.com/weir-stream/weir/internal/kafkabroker/kafkatest"
	"github.com/weir-stream/weir/internal/testproc"
)

// kafkaInput writes the example's input: JSON events {"key": k} spread
// over the topic's partitions round-robin, counted in want.
type kafkaInput struct {
	c     *kafkabroker.Cluster
	rng   *rand.Rand
	parts int32
	next  int
	want  map[string]int
	total int
}

func (in *kafkaInput) write(t *testing.T, n int) {
	t.Helper()
	// A new client each time: it learns partitions added since.
	cl, err := in.c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := fmt.Sprintf("k%02d", in.rng.IntN(40))
		in.want[k]++
		recs[i] = &kgo.Record{Topic: "page-views", Partition: int32(in.next) % in.parts, Key: []byte(k), Value: fmt.Appendf(nil, `{"key":%q,"i":%d}`, k, in.next)}
		in.next++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	in.total += n
}

func (in *kafkaInput) addPartitions(t *testing.T, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := in.c.AddPartitions(ctx, "page-views", int(n)); err != nil {
		t.Fatal(err)
	}
	in.parts = n
}

// killRun SIGKILLs a running 'weir run'.
func killRun(r *running) {
	r.cmd.Process.Signal(syscall.SIGKILL)
	err := <-r.done
	r.done <- err // for startRun's cleanup
}

// waitCommitted waits until the output topic holds total records visible
// to read_committed (franz-go's count; the Java consumer checks them).
func waitCommitted(t *testing.T, c *kafkabroker.Cluster, total int, r *running) {
	t.Helper()
	cl, err := c.Client(kgo.ConsumeTopics("page-view-counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := 0
	for seen < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed shows %d outputs, want %d\n%s", seen, total, r.stderr.String())
		}
		seen += fs.NumRecords()
	}
}

func TestRealBrokerKafkaExample(t *testing.T) {
	testproc.SkipUnlessLong(t)
	c := kafkatest.Start(t, 1, map[string]int32{"page-views": 4, "page-view-counts": 4}, nil)
	in := &kafkaInput{c: c, rng: rand.New(rand.NewPCG(17, 1)), parts: 4, want: map[string]int{}}
	dir := t.TempDir()
	spec := kafkaSpec(t, c)
	ctx := context.Background()

	in.write(t, 4000)
	for round := 0; round < 6; round++ {
		r := startRun(t, dir, spec)
		switch round {
		case 1:
			in.addPartitions(t, 6)
			in.write(t, 2000)
		case 2: // a controlled broker restart under the running pipeline
			c.Stop(0)
			if err := c.Restart(ctx, 0); err != nil {
				t.Fatal(err)
			}
		case 3: // again, later in the run
			time.Sleep(300 * time.Millisecond)
			c.Stop(0)
			if err := c.Restart(ctx, 0); err != nil {
				t.Fatal(err)
			}
		default:
			in.write(t, 1500)
		}
		time.Sleep(time.Duration(300+in.rng.IntN(1200)) * time.Millisecond)
		killRun(r)
	}

	// The last run: partitions added while it runs are picked up (the
	// controller lists the topic every 10 s), and it drains on stop.
	r := startRun(t, dir, spec)
	in.addPartitions(t, 8)
	in.write(t, 2000)
	waitCommitted(t, c, in.total, r)
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := r.wait(t); err != nil {
		t.Fatalf("weir run after stop: %v\n%s", err, r.stderr.String())
	}

	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	recs, err := c.ConsumeCommitted(rctx, "page-view-counts")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, rec := range recs {
		var row struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if err := json.Unmarshal([]byte(rec.Value), &row); err != nil || row.Key != rec.Key {
			t.Fatalf("output %q (key %q): %v", rec.Value, rec.Key, err)
		}
		got[row.Key] = append(got[row.Key], row.Count)
	}
	checkExact(t, got, in.want)
	if len(recs) != in.total {
		t.Errorf("the Java consumer read %d outputs, want %d", len(recs), in.total)
	}

	// The source's group (for lag tools) stands at the end of every
	// partition, the new ones included.
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(rctx, "page-views")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsets(rctx, "weir-page-view-counter")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := offs.Lookup("page-views", e.Partition); !ok || o.At != e.Offset {
			t.Errorf("group weir-page-view-counter at %d for partition %d, want its end %d", o.At, e.Partition, e.Offset)
		}
	})
}
