package handwritten

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/statictable/tabletest"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"

	"github.com/weir-stream/weir/internal/testproc"
)

// kafkaHelper runs KafkaCounter against the brokers in
// WEIR_HANDWRITTEN_BROKERS.
func kafkaHelper() int {
	return helper(func(ctx context.Context, st store.Store, batch int, committed func()) error {
		c := testKafkaCounter(strings.Split(os.Getenv("WEIR_HANDWRITTEN_BROKERS"), ","), batch)
		c.Store, c.Committed = st, func(int) { committed() }
		_, err := c.Run(ctx)
		return err
	})
}

func testKafkaCounter(brokers []string, batch int) KafkaCounter {
	return KafkaCounter{Brokers: brokers, In: "events", Out: "counts", Group: "counter", Batch: batch,
		ClientOpts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}}
}

// newKafka starts a one-broker kfake cluster with 4-partition topics
// "events" and "counts" and writes n events over keys keys to "events"
// (split by weir's key hash, as the bench splits them). It returns the
// cluster and the expected count per key.
func newKafka(t *testing.T, n, keys int, seed uint64) (*kfake.Cluster, map[string]int) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "events", "counts"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int{}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := fmt.Sprintf("k%04d", r.IntN(keys))
		want[k]++
		v, _ := json.Marshal(event{Key: k, Page: "/p/" + strconv.Itoa(i), Ms: int64(i), Ref: "x"})
		recs[i] = &kgo.Record{Topic: "events", Key: []byte(k), Value: v,
			Partition: int32(queue.PartitionOf(weir.Row{"key": k}, "key", 4, nil))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c, want
}

// readKafkaCounts reads "counts" with read_committed up to its last stable
// offsets: per key, its counts in increasing order.
func readKafkaCounts(t *testing.T, c *kfake.Cluster) map[string][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords()) // transaction markers move the position to the stable offset
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	pos := map[int32]int64{}
	got := map[string][]int64{}
	for !reached(pos, want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading counts: %v (at %v, want %v)", err, pos, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading counts: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			var v countRecord
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("counts record %q: %v", r.Value, err)
			}
			got[v.Key] = append(got[v.Key], v.Count)
		})
	}
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return got
}

// TestKafkaCounter: one uninterrupted run counts every event once; a second
// run finds nothing left.
func TestKafkaCounter(t *testing.T) {
	c, want := newKafka(t, 3000, 40, 3)
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kc := testKafkaCounter(c.ListenAddrs(), 100)
	kc.Store = st
	runTwice(t, 3000, kc.Run)
	tabletest.CheckExact(t, readKafkaCounts(t, c), want)
}

// TestKafkaCounterKilled: the franz-go loop with counts in the store,
// SIGKILLed at random moments (between and inside its store commit and its
// Kafka transaction) and restarted until it finishes, emits each key's
// counts 1..n exactly once in the read_committed output.
func TestKafkaCounterKilled(t *testing.T) {
	testproc.SkipUnlessLong(t) // kills a child process 12 times
	const events, batch = 20000, 200
	c, want := newKafka(t, events, 300, 5)
	dir := filepath.Join(t.TempDir(), "store")
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	committed := func() int64 {
		offs, err := kadm.NewClient(adm).FetchOffsets(context.Background(), "counter")
		if errors.Is(err, kerr.GroupIDNotFound) {
			return 0 // no transaction committed yet
		}
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At > 0 {
				n += o.At
			}
		})
		return n
	}
	half := func(done int64) int { return (events - int(done)) / batch / 2 }
	killLoop(t, 5, 12, committed, half, "kafka", "WEIR_HANDWRITTEN_DIR="+dir,
		"WEIR_HANDWRITTEN_BATCH="+strconv.Itoa(batch), "WEIR_HANDWRITTEN_BROKERS="+strings.Join(c.ListenAddrs(), ","))
	tabletest.CheckExact(t, readKafkaCounts(t, c), want)
}

// TestTxnRecordCodec: the txn record round-trips, and truncated or
// trailing bytes are refused.
func TestTxnRecordCodec(t *testing.T) {
	r := txnRecord{next: map[int32]int64{0: 10, 3: 7}, prev: map[int32]int64{0: 4},
		undo: []oldCount{{key: "a", n: 3}, {key: "b", absent: true}}}
	b := encodeTxnRecord(r)
	got, err := decodeTxnRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(r) {
		t.Fatalf("round trip: %v, want %v", got, r)
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodeTxnRecord(b[:i]); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeTxnRecord(append(b, 0)); err == nil {
		t.Fatal("trailing bytes decoded")
	}
}
