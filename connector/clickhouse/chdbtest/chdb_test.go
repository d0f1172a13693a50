//go:build chdb

package chdbtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chdb-io/chdb-go/chdb"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/internal/sinkharness"
	"github.com/weir-stream/weir/msgid"
)

var (
	session *chdb.Session
	// chMu serializes queries: the session is one embedded server.
	chMu sync.Mutex
)

func TestMain(m *testing.M) {
	if os.Getenv("CHDB_LIB_PATH") == "" {
		fmt.Fprintln(os.Stderr, "CHDB_LIB_PATH is not set")
	}
	dir, err := os.MkdirTemp("", "weir-chdb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	session, err = chdb.NewSession(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chdb session:", err)
		os.Exit(1)
	}
	code := m.Run()
	session.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// query runs sql on the embedded server.
func query(sql string) (string, error) {
	chMu.Lock()
	defer chMu.Unlock()
	r, err := session.Query(sql, "TabSeparated")
	if err != nil {
		return "", err
	}
	defer r.Free()
	if err := r.Error(); err != nil {
		return "", err
	}
	return string(r.Buf()), nil
}

func mustQuery(t testing.TB, sql string) string {
	t.Helper()
	out, err := query(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// transport runs the sink's requests on chDB as InlineSQL and records
// them.
type transport struct {
	endpoint string
	log      *requestLog
}

type requestLog struct {
	mu   sync.Mutex
	reqs []clickhouse.Request
}

func (l *requestLog) inserts() []clickhouse.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []clickhouse.Request
	for _, r := range l.reqs {
		if strings.HasPrefix(r.Query, "INSERT") {
			out = append(out, r)
		}
	}
	return out
}

func (l *requestLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		if strings.HasPrefix(r.Query, prefix) {
			n++
		}
	}
	return n
}

func (t *transport) Endpoint() string { return t.endpoint }
func (t *transport) Close()           {}

func (t *transport) Do(_ context.Context, r clickhouse.Request) ([]byte, error) {
	t.log.mu.Lock()
	t.log.reqs = append(t.log.reqs, r)
	t.log.mu.Unlock()
	if r.OnStart != nil {
		r.OnStart()
	}
	out, err := query(r.InlineSQL())
	if err != nil {
		return nil, clickhouse.ParseServerError(t.endpoint, err.Error())
	}
	return []byte(out), nil
}

func options(l *requestLog, logs *bytes.Buffer) clickhouse.Options {
	o := clickhouse.Options{Transport: func(endpoint string, _ clickhouse.TransportConfig) (clickhouse.Transport, error) {
		return &transport{endpoint: endpoint, log: l}, nil
	}}
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(&syncWriter{b: logs}, nil))
	}
	return o
}

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

var tableSeq atomic.Int64

// newTable creates a MergeTree table with the given settings clause.
func newTable(t testing.TB, settings string) string {
	t.Helper()
	name := fmt.Sprintf("t%d", tableSeq.Add(1))
	mustQuery(t, fmt.Sprintf("CREATE TABLE default.%s (key String, count Int64) ENGINE = MergeTree ORDER BY (key, count) %s", name, settings))
	return name
}

func params(table string, extra map[string]any) connector.SinkParams {
	p := map[string]any{"host": "chdb", "table": table, "retry_initial_delay": 1, "retry_maximum_delay": 10}
	for k, v := range extra {
		if v == nil {
			delete(p, k)
			continue
		}
		p[k] = v
	}
	return connector.SinkParams{SinkID: "out", Path: "computations.Counter.sinks.out", Parameters: p}
}

func rows(t testing.TB, table string) []string {
	t.Helper()
	out := strings.TrimSpace(mustQuery(t, "SELECT key, count FROM default."+table+" ORDER BY key, count"))
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// messages returns n messages of epoch seq: key k<i%keys>, count from+i.
func messages(seq uint64, n, keys, from int) []*weir.Message {
	out := make([]*weir.Message, n)
	for i := range out {
		out[i] = &weir.Message{ID: msgid.Ordered(seq, "counts", uint64(i)), Stream: "counts",
			Payload: weir.Row{"key": fmt.Sprintf("k%d", i%keys), "count": int64(from + i)}}
	}
	return out
}

func tokens(reqs []clickhouse.Request) []string {
	var out []string
	for _, r := range reqs {
		for _, s := range r.Settings {
			if s.Name == "insert_deduplication_token" {
				out = append(out, s.Value)
			}
		}
	}
	return out
}

// TestTokenDeduplicatesReplay: on a MergeTree with
// non_replicated_deduplication_window, the sink's batches carry
// insert_deduplication_token = the batch's last message id; after a crash
// between the INSERTs and the epoch that records them, the next life sends
// the same batches with the same tokens and ClickHouse drops them.
func TestTokenDeduplicatesReplay(t *testing.T) {
	table := newTable(t, "SETTINGS non_replicated_deduplication_window = 100")
	var l requestLog
	h := sinkharness.New(t)
	mk := func() *clickhouse.BatchingSink {
		return sinkharness.MustNew(t, clickhouse.NewBatchingSink, params(table, map[string]any{"max_batch_rows": 4}), options(&l, nil))
	}
	s := mk()
	h.MustInit(s)
	msgs := messages(1, 10, 3, 1) // batches of 4, 4, 2
	h.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 30*time.Second, "three INSERTs", func() bool { return len(l.inserts()) == 3 })
	h.Crash(s)
	s = mk()
	h.MustInit(s)
	h.Finish(s, msgs)
	if got := rows(t, table); len(got) != 10 {
		t.Errorf("%d rows after the replay, want 10: %v", len(got), got)
	}
	want := []string{string(msgs[3].ID), string(msgs[7].ID), string(msgs[9].ID)}
	got := tokens(l.inserts())
	if len(got) != 6 || strings.Join(got[:3], ",") != strings.Join(want, ",") || strings.Join(got[3:], ",") != strings.Join(want, ",") {
		t.Errorf("tokens %v, want %v twice (first life, then the replay)", got, want)
	}
}

// TestTokenNotContent: with a token, ClickHouse deduplicates by it, not by
// the data: two different batches whose rows are identical are both kept
// (on 18.16, without tokens, the second would be dropped), and the token
// prefix separates two sinks writing the same ids into one table.
func TestTokenNotContent(t *testing.T) {
	table := newTable(t, "SETTINGS non_replicated_deduplication_window = 100")
	var l requestLog
	for i, prefix := range []string{"", "other-pipeline/"} {
		h := sinkharness.New(t)
		s, err := clickhouse.NewBatchingSink(params(table, map[string]any{"deduplication_token_prefix": prefix}), options(&l, nil))
		if err != nil {
			t.Fatal(err)
		}
		h.MustInit(s)
		var all []*weir.Message
		for seq := uint64(1); seq <= 2; seq++ {
			msgs := messages(seq, 3, 3, 1) // the same rows in both epochs
			all = append(all, msgs...)
			h.MustEpoch(s, msgs...)
		}
		h.Finish(s, all)
		if got := rows(t, table); len(got) != 6*(i+1) {
			t.Fatalf("sink %d (prefix %q): %d rows, want %d", i, prefix, len(got), 6*(i+1))
		}
	}
}

// TestReplayAfterRepartitioning: the token is a property of the batch (its
// last message id), not of the partition or the sink instance: a new
// partition's sink, with no state of its own, that receives the same
// undelivered outputs forms the same batch and its INSERT is dropped.
func TestReplayAfterRepartitioning(t *testing.T) {
	table := newTable(t, "SETTINGS non_replicated_deduplication_window = 100")
	var l requestLog
	sp := params(table, map[string]any{"max_batch_rows": 100})
	old := sinkharness.New(t)
	s, err := clickhouse.NewBatchingSink(sp, options(&l, nil))
	if err != nil {
		t.Fatal(err)
	}
	old.MustInit(s)
	msgs := messages(7, 12, 4, 1)
	old.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 30*time.Second, "the INSERT", func() bool { return len(l.inserts()) == 1 })
	old.Crash(s)

	moved := sinkharness.New(t)
	moved.PartitionID = "Counter/split-1"
	s, err = clickhouse.NewBatchingSink(sp, options(&l, nil))
	if err != nil {
		t.Fatal(err)
	}
	moved.MustInit(s)
	if err := moved.Epoch(s, msgs...); err != nil { // the outputs, handed to the new partition
		t.Fatal(err)
	}
	moved.Finish(s, msgs)
	if got := rows(t, table); len(got) != 12 {
		t.Errorf("%d rows, want 12", len(got))
	}
	if tk := tokens(l.inserts()); len(tk) != 2 || tk[0] != tk[1] || tk[0] != string(msgs[11].ID) {
		t.Errorf("tokens %v: want the last message id twice", tk)
	}
}

// TestShardTokens: each shard's part of a batch carries the batch token
// with ":<shard>"; two shards on one table keep both parts (without the
// suffix the second part would be dropped as a duplicate of the first),
// and a replay of both is dropped.
func TestShardTokens(t *testing.T) {
	table := newTable(t, "SETTINGS non_replicated_deduplication_window = 100")
	var l requestLog
	sp := params(table, map[string]any{"host": nil, "shard_hosts": map[string]any{"east": []any{"chdb-east"}, "west": []any{"chdb-west"}}})
	h := sinkharness.New(t)
	mk := func() *clickhouse.BatchingSink {
		return sinkharness.MustNew(t, clickhouse.NewShardedBatchingSink, sp, options(&l, nil))
	}
	s := mk()
	h.MustInit(s)
	msgs := messages(3, 40, 10, 1)
	h.MustEpoch(s, msgs...)
	sinkharness.WaitFor(t, 30*time.Second, "both shards' INSERTs", func() bool { return len(l.inserts()) == 2 })
	h.Crash(s)
	s = mk()
	h.MustInit(s)
	h.Finish(s, msgs)
	if got := rows(t, table); len(got) != 40 {
		t.Errorf("%d rows, want 40", len(got))
	}
	end := string(msgs[39].ID)
	got := tokens(l.inserts())
	want := []string{end + ":east", end + ":west", end + ":east", end + ":west"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tokens %v, want %v", got, want)
	}
}

// TestDedupWindowWarning: a block-count window shorter than
// replay_horizon_inserts is warned about with the structured attributes;
// Reconfigure re-runs the check without validating the table again.
func TestDedupWindowWarning(t *testing.T) {
	table := newTable(t, "SETTINGS non_replicated_deduplication_window = 5")
	var l requestLog
	var logs bytes.Buffer
	s, err := clickhouse.NewBatchingSink(params(table, map[string]any{"replay_horizon_inserts": 100}), options(&l, &logs))
	if err != nil {
		t.Fatal(err)
	}
	h := sinkharness.New(t)
	h.MustInit(s)
	msgs := messages(1, 2, 2, 1)
	h.MustEpoch(s, msgs...)
	if err := h.Drain(s, msgs, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text := logs.String
	for _, want := range []string{clickhouse.DedupWindowWarning, "Database=default", "Table=" + table,
		"DedupWindowSetting=non_replicated_deduplication_window", `ReplayHorizon="100 inserts"`, `DedupWindow="5 blocks"`} {
		if !strings.Contains(text(), want) {
			t.Errorf("logs lack %q:\n%s", want, text())
		}
	}
	if strings.Contains(text(), "degrades") || strings.Contains(text(), "does not support insert_deduplication_token") {
		t.Errorf("unexpected warning:\n%s", text())
	}
	inspections := l.count("SELECT engine")
	before := strings.Count(text(), clickhouse.DedupWindowWarning)
	if err := s.Reconfigure(clickhouse.Dynamic{WriteTimeout: 5 * time.Second, ReplayHorizon: time.Hour, ReplayHorizonInserts: 3}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text(), clickhouse.DedupWindowWarning); n != before {
		t.Errorf("warned with a replay horizon (3 inserts) inside the window (5 blocks)")
	}
	if err := s.Reconfigure(clickhouse.Dynamic{WriteTimeout: 5 * time.Second, ReplayHorizon: time.Hour, ReplayHorizonInserts: 50}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text(), clickhouse.DedupWindowWarning); n != before+1 {
		t.Errorf("%d warnings after raising replay_horizon_inserts to 50, want %d", n, before+1)
	}
	more := messages(2, 2, 2, 3)
	h.MustEpoch(s, more...)
	if err := h.Drain(s, more, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := l.count("SELECT engine"); n != inspections {
		t.Errorf("the table was inspected %d times after reconfiguration; dynamic changes must not revalidate", n-inspections)
	}
}

// TestModernValidation: on 26.7 a MergeTree without a deduplication
// window degrades with a warning; with one it does not.
func TestModernValidation(t *testing.T) {
	for _, tc := range []struct {
		settings string
		degrade  bool
	}{{"", true}, {"SETTINGS non_replicated_deduplication_window = 10", false}} {
		table := newTable(t, tc.settings)
		var l requestLog
		var logs bytes.Buffer
		s, err := clickhouse.NewBatchingSink(params(table, nil), options(&l, &logs))
		if err != nil {
			t.Fatal(err)
		}
		h := sinkharness.New(t)
		h.MustInit(s)
		msgs := messages(1, 1, 1, 1)
		h.MustEpoch(s, msgs...)
		h.Finish(s, msgs)
		if got := strings.Contains(logs.String(), "exactly-once degrades to at-least-once"); got != tc.degrade {
			t.Errorf("settings %q: degradation warning %v, want %v:\n%s", tc.settings, got, tc.degrade, logs.String())
		}
	}
}

// TestErrorCodeNames: every code of the classification table has the name
// ClickHouse 26.7 gives it.
func TestErrorCodeNames(t *testing.T) {
	out := mustQuery(t, "SELECT code, name FROM system.errors SETTINGS system_events_show_zero_values = 1")
	names := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		c, n, _ := strings.Cut(line, "\t")
		names[c] = n
	}
	for _, e := range clickhouse.ErrorCodes() {
		if got := names[fmt.Sprint(e.Code)]; got != e.Name {
			t.Errorf("code %d: table says %s, ClickHouse says %q", e.Code, e.Name, got)
		}
	}
}
