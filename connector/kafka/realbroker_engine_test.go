package kafka_test

// The end-to-end pipeline (Kafka → Reader → Counter → Kafka sink, through
// engine.New) on real Apache Kafka brokers (internal/kafkabroker), with the
// faults a fake cannot make: jobs crashed at the engine's named points, a
// broker stopped and restarted while transactions run, a broker SIGKILLed
// mid-transaction (its coordinator's open transactions are recovered from
// its log on restart), a three-broker cluster losing a node for good, and
// a transaction the broker itself aborts after its timeout. The oracle is
// Apache Kafka's own Java consumer (KafkaConsumer) at read_committed: every key's
// counts 1..n exactly once (at-least-once sinks: none missing), nothing
// from aborted input, and the source's group offsets at the partitions'
// ends.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/internal/kafkabroker"
	"github.com/weir-stream/weir/internal/kafkabroker/kafkatest"
	"github.com/weir-stream/weir/job"

	"github.com/weir-stream/weir/internal/testproc"
)

// newRealE2E is newE2E on a real cluster of nodes.
func newRealE2E(t testing.TB, nodes int) (*e2e, *kafkabroker.Cluster) {
	c := kafkatest.Start(t, nodes, map[string]int32{"events": 3, "counts": 2}, nil)
	return &e2e{c: c, want: map[string]int{}, timeout: 3 * time.Minute}, c
}

// javaCounts reads "counts" with the Java consumer
// (kafkabroker.ConsumeCommitted) at read_committed: per key, the sorted
// counts.
func javaCounts(t testing.TB, c *kafkabroker.Cluster) map[string][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := c.ConsumeCommitted(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, r := range recs {
		addCount(t, got, r.Key, []byte(r.Value))
	}
	sortCounts(got)
	return got
}

// checkJavaExactlyOnce is checkExactlyOnce with the Java consumer's view,
// and compares it with franz-go's.
func (f *e2e) checkJavaExactlyOnce(t testing.TB, c *kafkabroker.Cluster) {
	t.Helper()
	got := javaCounts(t, c)
	f.checkCounts(t, got, "the Java consumer")
	if fmt.Sprint(got) != fmt.Sprint(f.counts(t)) {
		t.Errorf("the Java consumer and franz-go read different outputs")
	}
}

// duringRun runs fault in the background once the sink has written
// something (the output topic's end offsets are past 0), while the run
// goes on; the returned function waits for it and reports what it did.
func duringRun(t testing.TB, c *kafkabroker.Cluster, fault func(ctx context.Context) error) func() {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl, err := c.Client()
		if err != nil {
			done <- err
			return
		}
		adm := kadm.NewClient(cl)
		for {
			ends, err := adm.ListEndOffsets(ctx, "counts")
			written := int64(0)
			if err == nil {
				ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
			}
			if written > 0 {
				break
			}
			if ctx.Err() != nil {
				cl.Close()
				done <- fmt.Errorf("no output appeared before the fault")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		cl.Close()
		done <- fault(ctx)
	}()
	return func() {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("fault: %v", err)
		}
	}
}

// TestRealBrokerEngine: the pipeline on a real broker, each case with a
// fresh cluster; the cases run two at a time (t.Parallel, -parallel
// defaults to GOMAXPROCS): much of a case is waiting on its broker.
func TestRealBrokerEngine(t *testing.T) {
	testproc.SkipUnlessLong(t)
	kafkatest.Require(t)
	for _, tc := range []struct {
		name, reader    string
		events, keys    int
		seed, crashSeed uint64
	}{
		{"exactly-once/crashes", "SwiftPassthrough", 1500, 20, 3, 3},
		{"exactly-once/transform-reader", "Passthrough", 1000, 15, 4, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, c := newRealE2E(t, 1)
			f.writeEvents(t, tc.events, tc.keys, tc.seed)
			crashes := enginetest.NewCrashes(tc.crashSeed, 0.1, 20)
			f.run(t, counterSpecWith(c.Addrs(), tc.reader, kafka.SinkClassName, "", 20), crashes)
			f.checkJavaExactlyOnce(t, c)
			f.checkLagGroup(t)
			if crashes.Total() == 0 {
				t.Error("no crash injected")
			}
			t.Logf("crashes %v", crashes.Injected)
		})
	}
	for _, tc := range []struct{ name, class, params string }{
		{kafka.AtLeastOnceSinkClassName, kafka.AtLeastOnceSinkClassName, ""},
		{kafka.SinkClassName + "/at_least_once", kafka.SinkClassName, `"delivery_guarantee" = "at_least_once";`},
	} {
		t.Run("at-least-once/"+tc.name, func(t *testing.T) {
			t.Parallel()
			f, c := newRealE2E(t, 1)
			f.writeEvents(t, 1000, 15, 2)
			crashes := enginetest.NewCrashes(5, 0.15, 20, job.CrashBeforeCommit, job.CrashAfterCommitBeforeAck)
			f.run(t, counterSpecWith(c.Addrs(), "SwiftPassthrough", tc.class, tc.params, 20), crashes)
			extra := f.checkNoneMissing(t, javaCounts(t, c))
			t.Logf("%d outputs beyond the exact count; crashes %v", extra, crashes.Injected)
		})
	}
	// A controlled stop (SIGTERM) of a broker while the sinks' transactions
	// run: the pipeline's reads and writes fail, its jobs restart, and once
	// the broker is back every count is there once. Three brokers: a
	// single node that stops while a transaction ends can skip its markers
	// (as after a SIGKILL, below), and the sink then waits for an operator.
	t.Run("broker-restarted", func(t *testing.T) {
		t.Parallel()
		faultRun(t, 3, 3000, 5, true, func(ctx context.Context, c *kafkabroker.Cluster) error {
			c.Stop(0)
			time.Sleep(500 * time.Millisecond)
			return c.Restart(ctx, 0)
		})
	})
	// A crash (SIGKILL) of one of three brokers while transactions run, and
	// its restart a second later: the coordinators and leaders it held move
	// to the others, and back. (On a single node, Kafka 4.4.0 restarted
	// after a SIGKILL can skip the commit markers of a transaction it
	// finds half-completed — "Couldn't find leader endpoint for partitions
	// … these partitions are likely deleted already and hence can be
	// skipped" — leaving a hanging transaction: the partition's last stable
	// offset and the sink's marker group (UNSTABLE_OFFSET_COMMIT) stay stuck
	// until an operator aborts it with kafka-transactions.sh; see
	// connector/kafka's doc. That is the broker's failure, not one this
	// test can pass through, so the crash is tested where the cluster
	// survives it.)
	t.Run("broker-killed-mid-transaction", func(t *testing.T) {
		t.Parallel()
		faultRun(t, 3, 1500, 7, false, func(ctx context.Context, c *kafkabroker.Cluster) error {
			c.Kill(0)
			time.Sleep(time.Second)
			return c.Restart(ctx, 0)
		})
	})
	// Three brokers, replication factor 3, min.insync.replicas 2: one is
	// SIGKILLed while the pipeline runs and stays down; leaders and
	// transaction coordinators move to the other two.
	t.Run("three-brokers/one-lost", func(t *testing.T) {
		t.Parallel()
		faultRun(t, 3, 1500, 6, false, func(_ context.Context, c *kafkabroker.Cluster) error {
			c.Kill(1)
			return nil
		})
	})
}

// faultRun runs the exactly-once pipeline over events events on a fresh
// cluster of nodes, with fault applied once the sink has written
// something, and checks the output with the Java consumer and, if group,
// the source's group offsets. A write whose transaction coordinator died
// waits out transaction_timeout before it is retried: 10 s instead of 30.
//
// The group offsets are not checked where a node dies: the reader reads
// its finite partitions to their end long before the sink is done, and
// its last reports meet the dead node as the group's coordinator until
// the controller moves it (broker.session.timeout.ms, 9 s) — longer than
// a closing partition waits (see connector/kafka's doc). They are a lag
// report; the pipeline's position is in its own state.
func faultRun(t *testing.T, nodes, events int, seed uint64, group bool, fault func(context.Context, *kafkabroker.Cluster) error) {
	f, c := newRealE2E(t, nodes)
	f.writeEvents(t, events, 20, seed)
	wait := duringRun(t, c, func(ctx context.Context) error { return fault(ctx, c) })
	f.run(t, counterSpecWith(c.Addrs(), "SwiftPassthrough", kafka.SinkClassName, `"transaction_timeout" = 10000;`, 10), nil)
	wait()
	f.checkJavaExactlyOnce(t, c)
	if group {
		f.checkLagGroup(t)
	}
}
