package clickhouse_test

// Sink tests against a real ClickHouse 18.16 server (Debian's package)
// with ZooKeeper: ReplicatedMergeTree deduplicates a replayed block by its
// data, which is what the exactly-once sink relies on there (18.16 has no
// insert_deduplication_token; the token tests run on chDB, package
// chdbtest).

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/internal/sinkharness"
	"github.com/weir-stream/weir/msgid"
)

func msgIDOf(seq uint64, i int) msgid.ID { return msgid.Ordered(seq, "counts", uint64(i)) }

func rowCount(t testing.TB, srv *chserver.Server, table string) int {
	t.Helper()
	var n int
	fmt.Sscan(srv.MustQuery(t, "SELECT count() FROM default."+table), &n)
	return n
}

func newBatching(t testing.TB, sp connector.SinkParams, o clickhouse.Options) *clickhouse.BatchingSink {
	t.Helper()
	s, err := clickhouse.NewBatchingSink(sp, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplayAfterInsertIsDeduplicated crashes the sink after its INSERTs
// succeeded and before an epoch recorded them: the next life reloads the
// outbox, forms the same batches from the persisted plan (byte-identical)
// and ClickHouse drops them; each count is in the table once.
func TestReplayAfterInsertIsDeduplicated(t *testing.T) {
	srv := chserver.Shared(t)
	for _, format := range []string{clickhouse.FormatTabSeparated, clickhouse.FormatJSONEachRow} {
		t.Run(format, func(t *testing.T) {
			table := replicated(t, srv)
			sp := sinkParams(srv.Host(), table, map[string]any{"max_batch_rows": 7, "format": format})
			h := sinkharness.New(t)
			want := map[string]int{}
			s := newBatching(t, sp, clickhouse.Options{})
			h.MustInit(s)
			first := keyed(1, 20, 5, want) // 3 batches: 7, 7, 6 rows
			h.MustEpoch(s, first...)
			sinkharness.WaitFor(t, 30*time.Second, "all 20 rows inserted", func() bool { return rowCount(t, srv, table) == 20 })
			h.Crash(s)

			s2 := newBatching(t, sp, clickhouse.Options{})
			h.MustInit(s2)
			second := keyed(2, 15, 5, want)
			h.MustEpoch(s2, second...)
			h.Finish(s2, append(first, second...))
			checkExact(t, counts(t, srv, table), want)
		})
	}
}

// TestCrashBetweenBatches: the first batch is inserted, the others fail
// before reaching the server; after a crash the next life replays the
// first (deduplicated) and inserts the rest.
func TestCrashBetweenBatches(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	proxy := chserver.NewProxy(t, srv.HTTP)
	proxy.SetDecide(func(n int, _ string) chserver.Fault {
		if n == 1 {
			return chserver.Pass
		}
		return chserver.RefuseBefore
	})
	h := sinkharness.New(t)
	want := map[string]int{}
	s := newBatching(t, sinkParams(proxy.Host(), table, map[string]any{"max_batch_rows": 10}), clickhouse.Options{})
	h.MustInit(s)
	msgs := keyed(1, 35, 4, want)
	h.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 30*time.Second, "first batch in, second refused", func() bool {
		return rowCount(t, srv, table) == 10 && proxy.Count(chserver.RefuseBefore) >= 2
	})
	h.Crash(s)
	proxy.SetDecide(nil)
	s2 := newBatching(t, sinkParams(proxy.Host(), table, map[string]any{"max_batch_rows": 3}), clickhouse.Options{})
	h.MustInit(s2)
	h.Finish(s2, msgs)
	checkExact(t, counts(t, srv, table), want)
}

// TestDroppedAnswersAreRetriedWithTheSameBlock: the proxy lets ClickHouse
// apply every other INSERT and then cuts the connection (the sink sees
// EOF, an unknown outcome); the retry sends the same bytes, which
// ClickHouse drops.
func TestDroppedAnswersAreRetriedWithTheSameBlock(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	proxy := chserver.NewProxy(t, srv.HTTP)
	proxy.SetDecide(func(n int, _ string) chserver.Fault {
		if n%2 == 1 {
			return chserver.DropResponse
		}
		return chserver.Pass
	})
	h := sinkharness.New(t)
	want := map[string]int{}
	s := newBatching(t, withSinkID(sinkParams(proxy.Host(), table, map[string]any{"max_batch_rows": 5}), "eo-dropped"), clickhouse.Options{})
	h.MustInit(s)
	var all []*weir.Message
	for seq := uint64(1); seq <= 4; seq++ {
		msgs := keyed(seq, 12, 3, want)
		all = append(all, msgs...)
		h.MustEpoch(s, msgs...)
	}
	if err := h.Drain(s, all, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	h.Crash(s)
	checkExact(t, counts(t, srv, table), want)
	if proxy.Count(chserver.DropResponse) == 0 {
		t.Fatal("no answer was dropped: the test proves nothing")
	}
	// 48 messages in batches of 5 per epoch of 12: 3 batches an epoch.
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"weir_clickhouse_sink_batches_total", nil, 12},
		{"weir_clickhouse_sink_inserts_total", nil, float64(proxy.Count(chserver.Pass))},
		{"weir_clickhouse_sink_rows_total", nil, -1},
		{"weir_clickhouse_sink_insert_failures_total", map[string]string{"class": "transient", "code": "transport"}, float64(proxy.Count(chserver.DropResponse))},
		{"weir_clickhouse_sink_retries_total", map[string]string{"class": "transient"}, float64(proxy.Count(chserver.DropResponse))},
	} {
		got := metric(t, c.name, "eo-dropped", c.labels)
		if (c.want < 0 && got < 48) || (c.want >= 0 && got != c.want) {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// failureOf runs one epoch and waits for the sink to stop; it returns the
// error.
func failureOf(t *testing.T, s *clickhouse.BatchingSink, h *sinkharness.Harness, msgs ...*weir.Message) error {
	t.Helper()
	if err := h.Epoch(s, msgs...); err != nil {
		return err
	}
	sinkharness.WaitFor(t, 30*time.Second, "the sink stops", func() bool { return s.Failure() != nil })
	err := h.Epoch(s)
	if err == nil {
		t.Fatal("Sync succeeded on a stopped sink")
	}
	return err
}

// TestValidation: the writer session's checks on the first write.
func TestValidation(t *testing.T) {
	srv := chserver.Shared(t)
	local := newTable(t, srv, "MergeTree ORDER BY key")
	cases := []struct {
		name, engine string
		extra        map[string]any
		row          weir.Row
		want         []string
	}{
		{name: "distributed", engine: "Distributed(test_shard_localhost, default, " + local + ")",
			want: []string{"Distributed table", "ShardedClickHouseBatchingSink"}},
		{name: "log", engine: "Log", want: []string{"engine Log", "outside the MergeTree family"}},
		{name: "missing-table", extra: map[string]any{"table": "no_such_table"}, want: []string{"default.no_such_table does not exist"}},
		{name: "unknown-column", engine: "ReplicatedMergeTree('/clickhouse/tables/{shard}/{name}', '{replica}') ORDER BY key",
			row: weir.Row{"key": "a", "count": int64(1), "colour": "red"}, want: []string{`column "colour" is not among the columns`}},
		{name: "wrong-type", engine: "ReplicatedMergeTree('/clickhouse/tables/{shard}/{name}', '{replica}') ORDER BY key",
			row: weir.Row{"key": "a", "count": "one"}, want: []string{`column "count" (Int64)`, "not an integer"}},
		{name: "two-plain-hosts", engine: "MergeTree ORDER BY key", extra: map[string]any{"host": nil, "hosts": []any{srv.Host(), "localhost:" + strings.Split(srv.Host(), ":")[1]}},
			want: []string{"cannot be proven to hold the same logical table"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := "no_such_table"
			if tc.engine != "" {
				table = newTable(t, srv, tc.engine)
			}
			extra := map[string]any{"table": table}
			for k, v := range tc.extra {
				extra[k] = v
			}
			h := sinkharness.New(t)
			s := newBatching(t, sinkParams(srv.Host(), table, extra), clickhouse.Options{})
			defer s.Close()
			h.MustInit(s)
			row := tc.row
			if row == nil {
				row = weir.Row{"key": "a", "count": int64(1)}
			}
			err := failureOf(t, s, h, &weir.Message{ID: msgIDOf(1, 0), Stream: "counts", Payload: row})
			var ie *clickhouse.InsertError
			if !errors.As(err, &ie) || ie.Class != "permanent" {
				t.Errorf("error %v: want a permanent *InsertError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestPlainMergeTreeWarns: a single-host non-replicated MergeTree is
// accepted with a warning that exactly-once degrades to at-least-once
// (18.16 has no non_replicated_deduplication_window), and the warning that
// the server lacks token support is not given (there is no deduplication
// to rely on at all).
func TestPlainMergeTreeWarns(t *testing.T) {
	srv := chserver.Shared(t)
	table := newTable(t, srv, "MergeTree ORDER BY key")
	var logs logCapture
	h := sinkharness.New(t)
	s := newBatching(t, sinkParams(srv.Host(), table, nil), logs.options())
	h.MustInit(s)
	want := map[string]int{}
	msgs := keyed(1, 10, 2, want)
	h.MustEpoch(s, msgs...)
	h.Finish(s, msgs)
	checkExact(t, counts(t, srv, table), want)
	if !strings.Contains(logs.String(), "exactly-once degrades to at-least-once") {
		t.Errorf("no degradation warning; logs:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "insert_deduplication_token") {
		t.Errorf("token warning on a table without deduplication; logs:\n%s", logs.String())
	}
}

// TestTokenWarningOn1816: on a Replicated table the sink warns once that
// the server lacks insert_deduplication_token and relies on block
// deduplication; 18.16's window (604800 s) is longer than the default
// replay_horizon, and a replay_horizon_inserts above its 100 blocks is
// warned about with the structured attributes.
func TestTokenWarningOn1816(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	var logs logCapture
	h := sinkharness.New(t)
	s := newBatching(t, sinkParams(srv.Host(), table, map[string]any{"replay_horizon_inserts": 500}), logs.options())
	h.MustInit(s)
	msgs := keyed(1, 3, 1, map[string]int{})
	h.MustEpoch(s, msgs...)
	h.Finish(s, msgs)
	out := logs.String()
	for _, w := range []string{"does not support insert_deduplication_token", "Database=default", "Table=" + table,
		"DedupWindowSetting=replicated_deduplication_window ", `ReplayHorizon="500 inserts"`, `DedupWindow="100 blocks"`} {
		if !strings.Contains(out, w) {
			t.Errorf("logs lack %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "DedupWindowSetting=replicated_deduplication_window_seconds") {
		t.Errorf("warned about the 7-day window with a 1h replay_horizon:\n%s", out)
	}
}

// TestFailoverBetweenReplicas: hosts lists two endpoints of one
// Replicated table; the first answers queries but refuses INSERTs, so the
// writer fails over to the second, validates it (the same ZooKeeper path:
// the same logical table) and writes there.
func TestFailoverBetweenReplicas(t *testing.T) {
	srv := chserver.Shared(t)
	table := replicated(t, srv)
	flaky := chserver.NewProxy(t, srv.HTTP)
	flaky.SetDecide(func(int, string) chserver.Fault { return chserver.RefuseBefore })
	h := sinkharness.New(t)
	want := map[string]int{}
	sp := sinkParams("", table, map[string]any{"host": nil, "hosts": []any{flaky.Host(), srv.Host()}})
	s := sinkharness.MustNew(t, clickhouse.NewBatchingSink, sp, clickhouse.Options{})
	h.MustInit(s)
	msgs := keyed(1, 10, 2, want)
	h.MustEpoch(s, msgs...)
	h.Finish(s, msgs)
	checkExact(t, counts(t, srv, table), want)
	if flaky.Count(chserver.RefuseBefore) == 0 {
		t.Error("the first host refused nothing: no failover happened")
	}
}
