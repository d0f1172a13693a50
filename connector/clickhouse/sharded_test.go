package clickhouse_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/internal/sinkharness"
)

func shardedParams(table string, shards map[string]string, extra map[string]any) connector.SinkParams {
	sh := map[string]any{}
	for name, host := range shards {
		sh[name] = []any{host}
	}
	sp := sinkParams("", table, extra)
	delete(sp.Parameters, "host")
	sp.Parameters["shard_hosts"] = sh
	return sp
}

// TestShardedReplay: two shards (two endpoints of one server, each through
// its own proxy, so that each shard's INSERTs can be counted) get the rows
// rendezvous hashing assigns them; a crash after the INSERTs replays every
// shard's part, which ClickHouse drops; each count is in the table once.
func TestShardedReplay(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	pa, pb := chserver.NewProxy(t, srv.HTTP), chserver.NewProxy(t, srv.HTTP)
	sp := shardedParams(table, map[string]string{"a": pa.Host(), "b": pb.Host()}, map[string]any{"max_batch_rows": 8, "sharding_key_columns": []any{"key"}})
	newSink := func() *clickhouse.BatchingSink {
		return sinkharness.MustNew(t, clickhouse.NewShardedBatchingSink, sp, clickhouse.Options{})
	}
	h := sinkharness.New(t)
	want := map[string]int{}
	s := newSink()
	h.MustInit(s)
	msgs := keyed(1, 30, 6, want)
	h.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 30*time.Second, "all rows inserted", func() bool { return rowCount(t, srv, table) == 30 })
	h.Crash(s)
	s = newSink()
	h.MustInit(s)
	h.Finish(s, msgs)
	checkExact(t, counts(t, srv, table), want)
	if pa.Inserts() == 0 || pb.Inserts() == 0 {
		t.Errorf("shard INSERTs a=%d b=%d: rendezvous hashing sent every row to one shard", pa.Inserts(), pb.Inserts())
	}
	// A key's rows all go to one shard.
	out := srv.MustQuery(t, "SELECT key, uniqExact(msg_id) FROM default."+table+" GROUP BY key FORMAT TabSeparated")
	if strings.Count(out, "\n") != 6 {
		t.Errorf("keys: %q", out)
	}
}

// TestShardedTopologyGuard: a sink whose state holds undelivered batches
// planned for shards {a, b} refuses to start with shards {a, b, c}; with
// the old topology it starts and delivers them.
func TestShardedTopologyGuard(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	pa := chserver.NewProxy(t, srv.HTTP)
	pa.SetDecide(func(int, string) chserver.Fault { return chserver.RefuseBefore })
	old := map[string]string{"a": pa.Host(), "b": pa.Host()}
	h := sinkharness.New(t)
	want := map[string]int{}
	s, err := clickhouse.NewShardedBatchingSink(shardedParams(table, old, nil), clickhouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.MustInit(s)
	msgs := keyed(1, 10, 3, want)
	h.MustEpoch(s, msgs...)
	h.Crash(s)

	grown := map[string]string{"a": srv.Host(), "b": srv.Host(), "c": srv.Host()}
	s, err = clickhouse.NewShardedBatchingSink(shardedParams(table, grown, nil), clickhouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Init(s)
	if err == nil || !strings.Contains(err.Error(), "another shard topology") || !strings.Contains(err.Error(), "shards [a, b, c]") {
		t.Fatalf("Init with a new topology: %v; want a refusal naming the topologies", err)
	}
	s.Close()

	pa.SetDecide(nil)
	s, err = clickhouse.NewShardedBatchingSink(shardedParams(table, old, nil), clickhouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.MustInit(s)
	h.Finish(s, msgs)
	checkExact(t, counts(t, srv, table), want)

	// Delivered: the new topology may start now.
	s, err = clickhouse.NewShardedBatchingSink(shardedParams(table, grown, nil), clickhouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Init(s); err != nil {
		t.Fatalf("Init with a new topology after delivery: %v", err)
	}
	s.Close()
}
