// Package kafkatest starts real Apache Kafka brokers (package kafkabroker)
// for a test: skipped with the fetch command when java or the jars are
// missing, except under CI=true, where it fails (CI fetches the jars:
// .ci/run); stopped by PID when the test ends; logs kept on failure.
package kafkatest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/kafkabroker"
	"github.com/weir-stream/weir/internal/testproc"
)

// Require skips t (or fails it under CI=true) when no broker can be
// started here.
func Require(t testing.TB) {
	t.Helper()
	if err := kafkabroker.Available(); err != nil {
		testproc.Missing(t, "real-broker Kafka test: "+err.Error())
	}
}

// Start starts a cluster of nodes (each a broker and a controller) with
// topics (name → partitions) created and props added to the server
// properties. It is stopped when t ends; if t failed, the end of each
// node's log is logged and the directory is kept.
func Start(t testing.TB, nodes int, topics map[string]int32, props map[string]string) *kafkabroker.Cluster {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp("", "weir-kafka-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := kafkabroker.Start(ctx, kafkabroker.Config{Nodes: nodes, Dir: dir, Props: props})
	if err != nil {
		t.Fatalf("start a %d-node Kafka %s cluster: %v (files kept in %s)", nodes, kafkabroker.Version, err, dir)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			t.Logf("Kafka logs (kept in %s):\n%s", dir, c.LogTails())
			return
		}
		os.RemoveAll(dir)
	})
	if len(topics) > 0 {
		if err := c.CreateTopics(ctx, topics); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
