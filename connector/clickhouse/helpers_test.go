package clickhouse_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/internal/countoracle"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chserver.StopShared()
	os.Exit(code)
}

var tableSeq atomic.Int64

// newTable creates a fresh table on srv with the given engine clause and
// columns (key String, count Int64, msg_id String by default) and returns
// its name.
func newTable(t testing.TB, srv *chserver.Server, engine string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), tableSeq.Add(1))
	engine = strings.ReplaceAll(engine, "{name}", name)
	srv.MustQuery(t, fmt.Sprintf("CREATE TABLE default.%s (key String, count Int64, msg_id String) ENGINE = %s", name, engine))
	return name
}

func replicated(t testing.TB, srv *chserver.Server) string {
	return newTable(t, srv, "ReplicatedMergeTree('/clickhouse/tables/{shard}/{name}', '{replica}') ORDER BY (key, count)")
}

// sinkParams are the parameters of a sink writing to table on host.
func sinkParams(host, table string, extra map[string]any) connector.SinkParams {
	p := map[string]any{"host": host, "table": table, "message_id_column": "msg_id", "retry_initial_delay": 5, "retry_maximum_delay": 50}
	for k, v := range extra {
		if v == nil {
			delete(p, k)
			continue
		}
		p[k] = v
	}
	return connector.SinkParams{SinkID: "out", Path: "computations.Counter.sinks.out", Parameters: p}
}

// counts reads (key, count) rows: per key, the sorted counts.
func counts(t testing.TB, srv *chserver.Server, table string) map[string][]int64 {
	t.Helper()
	out := srv.MustQuery(t, "SELECT key, count FROM default."+table+" FORMAT TabSeparated")
	got := map[string][]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		k, c, _ := strings.Cut(line, "\t")
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		got[k] = append(got[k], n)
	}
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return got
}

// checkExact: each key of want has counts 1..n exactly once.
func checkExact(t testing.TB, got map[string][]int64, want map[string]int) {
	t.Helper()
	countoracle.Sort(got)
	for _, bad := range countoracle.Violations(got, want) {
		t.Error(bad)
	}
}

// logCapture collects structured log records.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logCapture) options() clickhouse.Options {
	return clickhouse.Options{Logger: slog.New(slog.NewTextHandler(l, nil))}
}

// keyed returns n messages of epoch seq for keys k0..k(keys-1) with the
// running counts continuing from next (updated), and want updated.
func keyed(seq uint64, n, keys int, next map[string]int) []*weir.Message {
	msgs := make([]*weir.Message, n)
	for i := range msgs {
		k := fmt.Sprintf("k%02d", (int(seq)*7+i)%keys)
		next[k]++
		msgs[i] = &weir.Message{ID: msgIDOf(seq, i), Stream: "counts", Payload: weir.Row{"key": k, "count": int64(next[k])}}
	}
	return msgs
}
