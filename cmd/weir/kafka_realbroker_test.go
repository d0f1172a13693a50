package main

// The Kafka example (examples/kafka: KafkaSource → Counter → KafkaSink)
// through the real binary on a real Apache Kafka cluster of three brokers
// (replication factor 3): 'weir run' is SIGKILLed again and again while the
// input grows, partitions are added to the input topic (one set between
// runs, one while the last run runs), and two brokers in turn are stopped
// and restarted while 'weir run' runs. Apache Kafka's own Java console
// consumer, at isolation.level=read_committed, must then read every key's
// counts 1..n exactly once, and the source's consumer group must stand at
// the end of every input partition.
//
// Three brokers, not one: a single node that stops (SIGTERM as much as
// SIGKILL) while a transaction ends can skip that transaction's markers
// ("Couldn't find leader endpoint … can be skipped", Kafka 4.4.0), and a
// transaction aborted that way is committed by the producer's next
// transaction: Kafka itself then shows outputs twice. See connector/kafka's
// doc; the sink refuses to write over such a transaction of its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
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
	c := kafkatest.Start(t, 3, map[string]int32{"page-views": 4, "page-view-counts": 4}, nil)
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
		case 3: // another broker, later in the run
			time.Sleep(300 * time.Millisecond)
			c.Stop(1)
			if err := c.Restart(ctx, 1); err != nil {
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
	if t.Failed() {
		explainRepeats(t, c, recs)
	}
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

// explainRepeats logs, for the first counts that appear twice, where each
// copy is (partition, offset) and the message id the sink wrote in its
// header: the same id twice means the sink wrote an output again, two ids
// that the Counter computed the count twice.
func explainRepeats(t *testing.T, c *kafkabroker.Cluster, recs []kafkabroker.Record) {
	t.Helper()
	type at struct {
		part int32
		off  int64
	}
	copies := map[string][]at{}
	var repeated []string
	for _, r := range recs {
		copies[r.Value] = append(copies[r.Value], at{r.Partition, r.Offset})
		if len(copies[r.Value]) == 2 {
			repeated = append(repeated, r.Value)
		}
	}
	if len(repeated) == 0 {
		return
	}
	ids := map[at]string{}
	cl, err := c.Client(kgo.ConsumeTopics("page-view-counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Log(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(ids) < len(recs) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "weir-message-id" {
					ids[at{r.Partition, r.Offset}] = string(h.Value)
				}
			}
		})
	}
	for i, v := range repeated {
		if i == 12 {
			t.Logf("… %d more repeated outputs", len(repeated)-i)
			break
		}
		var b strings.Builder
		for _, a := range copies[v] {
			fmt.Fprintf(&b, " [partition %d offset %d id %s]", a.part, a.off, ids[a])
		}
		t.Logf("output %s appears %d times:%s", v, len(copies[v]), b.String())
	}
	// Transactions whose markers a broker skipped (see connector/kafka's
	// doc on hanging transactions).
	for _, n := range c.Nodes {
		b, _ := os.ReadFile(n.LogPath())
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "Couldn't find leader endpoint") {
				t.Log(line)
			}
		}
	}
}
