package kafka_test

// End-to-end tests through engine.New: a Kafka topic → Reader
// (SwiftPassthrough over KafkaSource) → Counter (grouped by "key") → a
// Kafka sink, with jobs crashed at random and Kafka faults injected; a
// read_committed consumer of the output checks each key's counts.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/internal/countoracle"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/spec"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// counterSpec is the pipeline: sinkClass writes Counter's {"key","count"}
// rows to topic "counts" keyed by "key"; sinkParams are added to its
// parameters.
func counterSpec(brokers []string, sinkClass, sinkParams string) string {
	return counterSpecWith(brokers, "SwiftPassthrough", sinkClass, sinkParams, 50)
}

// counterSpecWith is counterSpec with the Reader's class and the
// computations' max_rows_per_batch.
func counterSpecWith(brokers []string, readerClass, sinkClass, sinkParams string, batch int) string {
	b, _ := json.Marshal(brokers)
	bl := strings.ReplaceAll(strings.Trim(string(b), "[]"), ",", ";")
	return fmt.Sprintf(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "%[5]s";
        "empty_batch_backoff" = 5;
        "max_rows_per_batch" = %[4]d;
        "source_streams" = {
            "events" = {
                "source_class_name" = "KafkaSource";
                "parameters" = {
                    "brokers" = [%[1]s];
                    "topic" = "events";
                    "group_id" = "weir-counter";
                    "finite" = %%true;
                    "poll_timeout" = 20;
                };
            };
        };
        "output_stream_ids" = ["words"];
    };
    "Counter" = {
        "computation_class_name" = "Counter";
        "group_by" = ["key"];
        "partition_count" = 2;
        "max_rows_per_batch" = %[4]d;
        "empty_batch_backoff" = 5;
        "input_stream_ids" = ["words"];
        "output_stream_ids" = ["counts"];
        "sinks" = {
            "out" = {
                "sink_class_name" = "%[2]s";
                "input_stream_ids" = ["counts"];
                "parameters" = {
                    "brokers" = [%[1]s];
                    "topic" = "counts";
                    "key_column" = "key";
                    %[3]s
                };
            };
        };
    };
};
"streams" = {"words" = {}; "counts" = {}};
"dynamic_spec" = {"scheduler_period" = 20};
`, bl, sinkClass, sinkParams, batch, readerClass)
}

// e2e is one end-to-end run's fixture.
type e2e struct {
	c    kafka.Brokers
	want map[string]int
	// timeout bounds a run (60 s if zero).
	timeout time.Duration
	mu      sync.Mutex
	logs    []string
}

func newE2E(t testing.TB) *e2e {
	return &e2e{c: kafka.NewClusterForTest(t, map[string]int32{"events": 3, "counts": 2}), want: map[string]int{}}
}

func (f *e2e) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *e2e) logText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.logs, "\n")
}

// writeEvents writes n {"key": ...} events over keys keys: part of them in
// committed transactions (whose markers leave offset gaps), part plainly,
// and some in aborted transactions with key "aborted", which must not be
// counted. Record times go backwards (a producer sets CreateTime): taken
// as SystemTimestamps they would put later records below the watermark of
// earlier ones, and receivers would drop them as processed.
func (f *e2e) writeEvents(t testing.TB, n, keys int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	// Record times start an hour ago: a real broker refuses times more
	// than an hour ahead (log.message.timestamp.after.max.ms).
	base := time.Now().Add(-time.Hour).Unix()
	plain := kafka.NewClientForTest(t, f.c)
	txn := kafka.NewClientForTest(t, f.c, kgo.TransactionalID(fmt.Sprintf("input-%d", seed)))
	for i := 0; i < n; {
		batch := min(n-i, 1+r.IntN(20))
		recs := make([]*kgo.Record, batch)
		for j := range recs {
			k := fmt.Sprintf("k%02d", r.IntN(keys))
			recs[j] = &kgo.Record{Topic: "events", Key: []byte(k), Value: fmt.Appendf(nil, `{"key":%q}`, k),
				Timestamp: time.Unix(base-int64(i+j), 0)}
			f.want[k]++
		}
		i += batch
		switch r.IntN(3) {
		case 0:
			if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		default:
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
		if r.IntN(5) == 0 {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte(`{"key":"aborted"}`)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (f *e2e) run(t testing.TB, specText string, hooks job.Hooks) {
	t.Helper()
	p, err := spec.Parse([]byte(specText), "test.yson")
	if err != nil {
		t.Fatal(err)
	}
	// Injected crashes are job failures: restart them quickly (the
	// default backoff grows to 30 s).
	p.Dynamic.JobRestartBackoff = spec.Duration(10 * time.Millisecond)
	p.Dynamic.JobRestartBackoffMax = spec.Duration(100 * time.Millisecond)
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conns := connector.NewRegistry()
	if err := queue.Register(conns); err != nil {
		t.Fatal(err)
	}
	if err := kafka.RegisterWith(conns, kafka.TestOptionsForTest(f.logf)); err != nil {
		t.Fatal(err)
	}
	timeout := f.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: engine.DefaultClasses(), Connectors: conns, Logf: f.logf, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	state, err := e.Run(ctx)
	if err != nil || state != controller.Completed {
		logs := f.logText()
		t.Fatalf("run ended in %s: %v\n%s", state, err, logs[max(0, len(logs)-6000):])
	}
}

// counts reads "counts" as a read_committed consumer: per key, the sorted
// counts.
func (f *e2e) counts(t testing.TB) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for _, r := range kafka.ReadCommittedForTest(t, f.c, "counts") {
		addCount(t, got, string(r.Key), r.Value)
	}
	sortCounts(got)
	return got
}

// addCount decodes an output {"key","count"} with its record key into got.
func addCount(t testing.TB, got map[string][]int64, key string, value []byte) {
	t.Helper()
	var row struct {
		Key   string `json:"key"`
		Count int64  `json:"count"`
	}
	if err := json.Unmarshal(value, &row); err != nil {
		t.Fatalf("output %q: %v", value, err)
	}
	if key != row.Key {
		t.Fatalf("output key %q, row key %q", key, row.Key)
	}
	got[row.Key] = append(got[row.Key], row.Count)
}

func sortCounts(got map[string][]int64) {
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
}

func (f *e2e) checkExactlyOnce(t testing.TB) {
	t.Helper()
	f.checkCounts(t, f.counts(t), "franz-go")
}

// checkCounts: got (read by reader) holds each key's counts 1..n once.
func (f *e2e) checkCounts(t testing.TB, got map[string][]int64, reader string) {
	t.Helper()
	countoracle.Sort(got)
	for _, bad := range countoracle.Violations(got, f.want) {
		t.Errorf("read with %s: %s", reader, bad)
	}
}

// checkLagGroup: the source committed the pipeline's final position of
// every partition to group_id: the end of the partition (a trailing
// transaction marker may be left out if it arrived after the last batch).
func (f *e2e) checkLagGroup(t testing.TB) {
	t.Helper()
	adm := kadm.NewClient(kafka.NewClientForTest(t, f.c))
	ctx := context.Background()
	ends, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsets(ctx, "weir-counter")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup("events", e.Partition)
		if !ok || o.At < e.Offset-1 || o.At > e.Offset {
			t.Errorf("group weir-counter at %+v for partition %d, want %d (or one less)", o.At, e.Partition, e.Offset)
			for _, l := range strings.Split(f.logText(), "\n") {
				if strings.Contains(l, "group") {
					t.Log(l)
				}
			}
		}
	})
}

// checkAtLeastOnce checks no count is missing and returns how many
// outputs are duplicates.
func (f *e2e) checkAtLeastOnce(t testing.TB) int {
	t.Helper()
	return f.checkNoneMissing(t, f.counts(t))
}

// checkNoneMissing checks that got holds every count of every key and
// returns how many outputs it holds beyond the exact counts.
func (f *e2e) checkNoneMissing(t testing.TB, got map[string][]int64) int {
	t.Helper()
	extra := 0
	for k, n := range f.want {
		seen := map[int64]bool{}
		for _, c := range got[k] {
			seen[c] = true
		}
		for i := 1; i <= n; i++ {
			if !seen[int64(i)] {
				t.Errorf("key %s: count %d missing", k, i)
			}
		}
		extra += len(got[k]) - n
	}
	return extra
}

// injectFaults installs Kafka faults on the sink's traffic and a fencer:
// produce requests to "counts" applied but answered REQUEST_TIMED_OUT (the
// client resends; the idempotent producer deduplicates), coordinator
// errors on EndTxn and AddOffsetsToTxn, a failed marker commit (the
// transaction aborts and is written again), and, for a data commit of
// up to two sink transactional ids, an outsider that initializes the id
// while the commit waits: the commit fails with PRODUCER_FENCED, the sink
// instance stops and its job restarts with a new one. It returns how many
// ids were fenced.
func injectFaults(t testing.TB, c *kfake.Cluster) *atomic.Int32 {
	// The faults start with the sinks' first data write, so that they hit
	// data transactions rather than only the start-up marker commits.
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || !strings.HasPrefix(*req.TransactionID, "weir-") {
			return nil, nil, false
		}
		c.DropControl()
		for _, fl := range []kfake.Fault{
			{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counts", Err: kerr.RequestTimedOut, Count: 3},
			{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.CoordinatorNotAvailable, TopLevel: true, Count: 2},
			{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true, Count: 2},
			{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.ConcurrentTransactions, TopLevel: true, Count: 2},
			{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError, Count: 1},
		} {
			h := c.Fault(fl)
			t.Cleanup(func() { t.Logf("fault %v %v: %d hits", fl.Keys, fl.Err, h.Hits()) })
		}
		return nil, nil, false
	})
	fenced := &atomic.Int32{}
	commits := map[string]int{} // cluster goroutine only
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.EndTxnRequest)
		if !req.Commit || !strings.HasPrefix(req.TransactionalID, "weir-") {
			return nil, nil, false
		}
		// The first commit of an id is its start-up marker; fence at the
		// third (a data transaction), for two ids.
		commits[req.TransactionalID]++
		if commits[req.TransactionalID] != 3 || fenced.Load() >= 2 {
			return nil, nil, false
		}
		c.SleepControl(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(req.TransactionalID))
			if err != nil {
				return
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, _, err := cl.ProducerID(ctx); err == nil {
				fenced.Add(1)
			}
		})
		return nil, nil, false
	})
	return fenced
}

// TestEngineExactlyOnce: Kafka → Counter → KafkaSink through the engine,
// first clean, then with jobs crashed at every named point and Kafka
// faults (produce timeouts after apply, coordinator errors, a failed
// marker commit, fenced producers): a read_committed consumer sees each
// key's counts 1..n exactly once, and nothing from aborted input.
func TestEngineExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		faults bool
		seed   uint64
	}{{false, 1}, {true, 3}, {true, 11}} {
		t.Run(fmt.Sprintf("faults=%v/seed=%d", tc.faults, tc.seed), func(t *testing.T) {
			f := newE2E(t)
			f.writeEvents(t, 600, 20, tc.seed)
			var hooks job.Hooks
			var crashes *enginetest.Crashes
			var fenced *atomic.Int32
			if tc.faults {
				crashes = enginetest.NewCrashes(tc.seed, 0.1, 20)
				hooks = crashes
				fenced = injectFaults(t, f.c.(*kfake.Cluster))
			}
			f.run(t, counterSpec(f.c.ListenAddrs(), kafka.SinkClassName, ""), hooks)
			f.checkExactlyOnce(t)
			f.checkLagGroup(t)
			if crashes != nil {
				if crashes.Total() == 0 {
					t.Error("no crash injected")
				}
				if testing.Verbose() {
					t.Log(f.logText())
				}
				stopped := 0
				for _, l := range strings.Split(f.logText(), "\n") {
					if strings.Contains(l, "removing job") && strings.Contains(l, "fenced by a newer instance") {
						stopped++
					}
				}
				// A fenced instance usually stops with ErrFenced; it may also
				// crash first, or see the fence as another error (an injected
				// EndTxn fault), then re-initialize: either way is correct.
				if fenced.Load() == 0 {
					t.Error("no transactional id was fenced by the outsider")
				}
				t.Logf("crashes %v; transactional ids fenced by an outsider: %d; sink instances stopped by the fence: %d",
					crashes.Injected, fenced.Load(), stopped)
			}
		})
	}
}

// TestEngineTransformReader: the same pipeline with a Transform reader
// (TransformOrderedSource: the source position commits with the epoch's
// outputs), jobs crashed at random.
func TestEngineTransformReader(t *testing.T) {
	f := newE2E(t)
	f.writeEvents(t, 400, 15, 4)
	crashes := enginetest.NewCrashes(8, 0.1, 15)
	f.run(t, counterSpecWith(f.c.ListenAddrs(), "Passthrough", kafka.SinkClassName, "", 50), crashes)
	f.checkExactlyOnce(t)
	f.checkLagGroup(t)
	t.Logf("crashes %v", crashes.Injected)
}

// TestEngineAtLeastOnce: KafkaSink with delivery_guarantee =
// at_least_once and AtLeastOnceKafkaSink lose nothing; without crashes
// they write each count once, with crashes (after the Kafka write, before
// the epoch records it) duplicates appear.
func TestEngineAtLeastOnce(t *testing.T) {
	for _, tc := range []struct{ class, params string }{
		{kafka.SinkClassName, `"delivery_guarantee" = "at_least_once";`},
		{kafka.AtLeastOnceSinkClassName, ""},
	} {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crashes=%v", tc.class, crash), func(t *testing.T) {
				f := newE2E(t)
				f.writeEvents(t, 400, 15, 2)
				var hooks job.Hooks
				if crash {
					hooks = enginetest.NewCrashes(5, 0.15, 20, job.CrashBeforeCommit, job.CrashAfterCommitBeforeAck)
				}
				f.run(t, counterSpec(f.c.ListenAddrs(), tc.class, tc.params), hooks)
				extra := f.checkAtLeastOnce(t)
				if !crash && extra != 0 {
					t.Errorf("%d duplicates without any restart", extra)
				}
				t.Logf("%d outputs beyond the exact count", extra)
			})
		}
	}
}

// TestExampleSpecPlan: examples/kafka/spec.yson builds a runtime plan with
// the default classes and connectors (kafka.Register is among them); no
// broker is contacted to build it.
func TestExampleSpecPlan(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "kafka", "spec.yson")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse(data, path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := engine.BuildPlan(context.Background(), p, engine.DefaultClasses(), engine.DefaultConnectors(), st); err != nil {
		t.Fatal(err)
	}
}
