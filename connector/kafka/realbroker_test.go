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
	"testing"

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
		t.Run(tc.name, func(t *testing.T) { tc.run(t, realCluster) })
	}
}
