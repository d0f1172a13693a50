package kafka

// The connector's tests that need no kfake fault injection, run again on a
// real Apache Kafka broker (a KRaft node started by internal/kafkabroker):
// source offsets and their gaps at real transaction markers, stable
// timestamps, malformed records, partitions added while reading, group
// offsets that only move forward; KafkaSink's restart from a marker, the
// zombie fenced by the broker's producer epochs, a lost marker. kfake is a
// fake: these show that what the kfake tests prove holds on the broker
// users run. Each subtest gets a fresh broker (a few seconds each), so no
// transactional id, group or topic leaks from one into another.

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/kafkabroker/kafkatest"

	"github.com/weir-stream/weir/internal/testproc"
)

// realCluster starts a one-node Apache Kafka cluster for t.
func realCluster(t testing.TB, topics map[string]int32) brokers {
	return kafkatest.Start(t, 1, topics, nil)
}

func TestRealBroker(t *testing.T) {
	testproc.SkipUnlessLong(t)
	kafkatest.Require(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, clusterFunc)
	}{
		{"SourceOffsetsWithGaps", testSourceOffsetsWithGaps},
		{"SourceTimestampsStable", testSourceTimestampsStable},
		{"SourceMalformed", testSourceMalformed},
		{"SourcePartitionCountChange", testSourcePartitionCountChange},
		{"GroupOffsetOnlyMovesForward", testGroupOffsetOnlyMovesForward},
		{"SinkExactlyOnceRestart", testSinkExactlyOnceRestart},
		{"SinkZombieFenced", testSinkZombieFenced},
		{"SinkMarkerLost", testSinkMarkerLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each has its own broker; mostly waiting on it
			tc.run(t, realCluster)
		})
	}
}

// TestRealBrokerTransactionTimeout: the sink's process stalls inside a
// data transaction — after its records and progress marker, before the
// commit — for longer than transaction_timeout, so the broker's
// coordinator aborts the transaction on its own (a real broker does this;
// kfake does not). Nothing of the aborted transaction may become visible,
// and the messages must still land exactly once: the sink instance that
// stalled fails its write (or stops, if the broker's answer looks like a
// fence), and it or a new instance from the same state writes them again.
func TestRealBrokerTransactionTimeout(t *testing.T) {
	testproc.SkipUnlessLong(t)
	c := kafkatest.Start(t, 1, map[string]int32{"out": 2}, nil)
	h := newSinkHarness(t)
	var commits atomic.Int32
	var stalled atomic.Bool
	opts := testOptions(t.Logf)
	opts.beforeCommit = func() {
		if commits.Add(1) == 2 { // the second data transaction
			// timeout 1.5 s; the broker checks every second (kafkabroker.Settings)
			time.Sleep(5 * time.Second)
			stalled.Store(true)
		}
	}
	params := sinkParams(c, map[string]any{"transaction_timeout": 1500})
	s, err := NewSink(params, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h.init(s)
	msgs := messages(100, "k", 0, 30)
	if err := h.epoch(s, msgs[:10]...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s, idsOf(msgs[:10])); err != nil {
		t.Fatal(err)
	}
	// The stalled transaction: the broker aborts it while it waits.
	err = h.epoch(s, msgs[10:20]...)
	if err == nil {
		err = h.drain(s, idsOf(msgs[10:20]))
	}
	if !stalled.Load() {
		t.Fatal("the second data transaction did not stall: the test proves nothing")
	}
	live := s
	if err != nil || s.Failure() != nil {
		// The instance gave up (the broker's abort can look like a fence):
		// a new one from the committed state takes over, as a restarted
		// job would.
		t.Logf("the stalled instance: epoch %v, failure %v", err, s.Failure())
		live, err = NewSink(params, testOptions(t.Logf))
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		h.init(live)
		if err := h.epoch(live, msgs[10:20]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.epoch(live, msgs[20:]...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(live, idsOf(msgs)); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, payloadNs(t, readCommitted(t, c, "out")), 30)
	t.Logf("sink log:\n%s", h.logText())
	// The broker's coordinator, not the client, ended the stalled
	// transaction.
	log, err := os.ReadFile(c.Nodes[0].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	want := "Completed rollback of ongoing transaction for transactionalId " + s.TransactionalID() + " due to timeout"
	if !strings.Contains(string(log), want) {
		t.Errorf("the broker's log has no %q: the broker did not time the transaction out", want)
	}
}
