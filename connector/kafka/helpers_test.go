package kafka

// Test fixtures: an in-process Kafka (kfake), a read_committed reader of a
// whole topic, and a harness that drives one sink instance through epochs
// the way the runtime does (Distribute, Sync into a transaction that
// "commits" the saved state, Commit), with its persisted state in memory so
// that two instances can share it.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// newCluster starts a one-broker kfake cluster with topics (name →
// partition count).
func newCluster(t testing.TB, topics map[string]int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	for name, n := range topics {
		opts = append(opts, kfake.SeedTopics(n, name))
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// brokers is a Kafka cluster the tests reach: kfake's in-process cluster
// or a real Apache Kafka cluster (kafkabroker.Cluster).
type brokers interface{ ListenAddrs() []string }

// clusterFunc starts a cluster with topics (name → partition count) for
// t: kfakeCluster, or a real broker (realbroker_test.go). Tests that need
// no kfake fault injection take one, so that they run on both.
type clusterFunc func(t testing.TB, topics map[string]int32) brokers

func kfakeCluster(t testing.TB, topics map[string]int32) brokers { return newCluster(t, topics) }

// testOptions are connector Options for tests: quick retries, logs kept.
func testOptions(logf func(string, ...any)) Options {
	return Options{
		Logf:       logf,
		Env:        func(string) (string, bool) { return "", false },
		ClientOpts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })},
	}
}

func newClient(t testing.TB, c brokers, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readCommitted reads every record of topic visible to read_committed, up
// to the last stable offset of each partition at the call.
func readCommitted(t testing.TB, c brokers, topic string) []*kgo.Record {
	t.Helper()
	return readTopic(t, c, topic, true)
}

func readTopic(t testing.TB, c brokers, topic string, committed bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c))
	var ends kadm.ListedOffsets
	var err error
	if committed {
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	var out []*kgo.Record
	pos := map[int32]int64{}
	done := func() bool {
		for p, e := range want {
			if pos[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (at %v, want %v)", topic, err, pos, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// sinkHarness drives a sink instance like the runtime does, keeping the
// persisted state in memory.
type sinkHarness struct {
	t testing.TB

	mu      sync.Mutex
	state   []byte // committed state
	pending []byte // saved by the current Sync
	saved   bool
	acked   map[msgid.ID]int
	failed  []error
	logs    []string
}

func newSinkHarness(t testing.TB) *sinkHarness {
	return &sinkHarness{t: t, acked: map[msgid.ID]int{}}
}

func (h *sinkHarness) sinkContext() connector.SinkContext {
	return connector.SinkContext{
		PartitionID: "Counter/0",
		SinkID:      "out",
		LoadState: func(context.Context) ([]byte, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return append([]byte(nil), h.state...), nil
		},
		SaveState: func(_ *store.Txn, b []byte) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.pending, h.saved = append([]byte(nil), b...), true
		},
		Logf: func(format string, args ...any) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.logs = append(h.logs, fmt.Sprintf(format, args...))
		},
	}
}

func (h *sinkHarness) logText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.logs, "\n")
}

// init builds and initializes an instance over the harness's state.
func (h *sinkHarness) init(s connector.Sink) {
	h.t.Helper()
	if err := s.Init(context.Background(), h.sinkContext()); err != nil {
		h.t.Fatal(err)
	}
}

// epoch distributes msgs and runs Sync; if Sync succeeds the saved state
// commits and Commit runs.
func (h *sinkHarness) epoch(s connector.Sink, msgs ...*weir.Message) error {
	for _, m := range msgs {
		id := m.ID
		s.Distribute(m, func(err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if err != nil {
				h.failed = append(h.failed, err)
				return
			}
			h.acked[id]++
		})
	}
	h.mu.Lock()
	h.saved = false
	h.mu.Unlock()
	if err := s.Sync(context.Background(), store.NewTxn()); err != nil {
		return err
	}
	h.mu.Lock()
	if h.saved {
		h.state = h.pending
	}
	h.mu.Unlock()
	s.Commit(context.Background())
	return nil
}

// writeAll runs an epoch of msgs on s, then drains it until every message
// of all is acknowledged, failing the test on an error.
func (h *sinkHarness) writeAll(s connector.Sink, msgs, all []*weir.Message) {
	h.t.Helper()
	if err := h.epoch(s, msgs...); err != nil {
		h.t.Fatal(err)
	}
	if err := h.drain(s, idsOf(all)); err != nil {
		h.t.Fatal(err)
	}
}

// drain runs empty epochs until every id in ids is acknowledged.
func (h *sinkHarness) drain(s connector.Sink, ids []msgid.ID) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		all := true
		for _, id := range ids {
			if h.acked[id] == 0 {
				all = false
				break
			}
		}
		h.mu.Unlock()
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every message acknowledged in time")
		}
		if err := h.epoch(s); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// messages returns n messages with increasing ids from seq, payload
// {"key": key, "n": i}.
func messages(seq uint64, key string, from, n int) []*weir.Message {
	out := make([]*weir.Message, n)
	for i := range out {
		out[i] = &weir.Message{
			ID:      msgid.Ordered(seq, "counts", uint64(from+i)),
			Stream:  "counts",
			Payload: weir.Row{"key": key, "n": int64(from + i)},
		}
	}
	return out
}

func idsOf(msgs []*weir.Message) []msgid.ID {
	out := make([]msgid.ID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func sinkParams(c brokers, extra map[string]any) connector.SinkParams {
	p := map[string]any{"brokers": c.ListenAddrs(), "topic": "out", "key_column": "key"}
	for k, v := range extra {
		p[k] = v
	}
	return connector.SinkParams{SinkID: "out", Path: "computations.Counter.sinks.out", Parameters: p}
}

// waitFor polls cond for up to 20s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faultProduceAll fails every produce to topic with a retriable error.
func faultProduceAll(topic string) kfake.Fault {
	return kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotEnoughReplicas, Count: -1}
}
