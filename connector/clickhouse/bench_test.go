package clickhouse_test

// Figures (reported, never asserted): rows/s into a ReplicatedMergeTree on
// the real 18.16 server (+ ZooKeeper) with ClickHouseBatchingSink at
// several batch sizes and both row formats, next to a hand-written loop of
// HTTP INSERTs of the same rows in the same batches. Run:
//
//	go test -run '^$' -bench BenchmarkInsertRows -benchtime 60x ./connector/clickhouse/
//
// One iteration sends one batch down each path, interleaved: the sink's
// is an epoch that distributes max_batch_rows messages, plans them and
// commits (the harness keeps state in memory: the engine's own epoch
// commit is not included), the INSERT, and the epoch that records it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/clickhouse/internal/chserver"
	"github.com/weir-stream/weir/internal/sinkharness"
	"github.com/weir-stream/weir/msgid"
)

func benchMessages(seq uint64, n int) []*weir.Message {
	msgs := make([]*weir.Message, n)
	for i := range msgs {
		msgs[i] = &weir.Message{ID: msgid.Ordered(seq, "counts", uint64(i)), Stream: "counts",
			Payload: weir.Row{"key": "key-" + strconv.Itoa(i%1000), "count": int64(seq)*1_000_000 + int64(i)}}
	}
	return msgs
}

// sinkPath sends batches through a BatchingSink driven by the harness.
type sinkPath struct {
	h *sinkharness.Harness
	s *clickhouse.BatchingSink
}

func newSinkPath(b *testing.B, srv *chserver.Server, n int, format string) *sinkPath {
	table := replicated(b, srv)
	s := sinkharness.MustNew(b, clickhouse.NewBatchingSink, sinkParams(srv.Host(), table, map[string]any{"max_batch_rows": n, "format": format}),
		clickhouse.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := sinkharness.New(b)
	h.MustInit(s)
	b.Cleanup(func() { s.Close() })
	return &sinkPath{h: h, s: s}
}

// send runs the epoch that plans msgs (one batch), waits for its INSERT
// and runs the epoch that records it, as the engine does.
func (p *sinkPath) send(b *testing.B, msgs []*weir.Message) {
	if err := p.h.Epoch(p.s, msgs...); err != nil {
		b.Fatal(err)
	}
	for p.h.Acked(msgs[len(msgs)-1].ID) == 0 {
		for !p.s.PendingSync() {
			time.Sleep(100 * time.Microsecond)
		}
		if err := p.h.Epoch(p.s); err != nil {
			b.Fatal(err)
		}
	}
}

// httpPath is the hand-written loop: encode the batch, POST it.
type httpPath struct {
	url    string
	client *http.Client
	body   []byte
}

func newHTTPPath(b *testing.B, srv *chserver.Server) *httpPath {
	table := replicated(b, srv)
	return &httpPath{client: &http.Client{}, url: srv.HTTP + "/?" + url.Values{
		"query":              {"INSERT INTO `default`.`" + table + "` (`key`, `count`, `msg_id`) FORMAT TabSeparated"},
		"insert_deduplicate": {"1"},
	}.Encode()}
}

func (p *httpPath) send(b *testing.B, msgs []*weir.Message) {
	// The values are known to need no escaping.
	p.body = p.body[:0]
	for _, m := range msgs {
		p.body = append(p.body, m.Payload["key"].(string)...)
		p.body = append(p.body, '\t')
		p.body = strconv.AppendInt(p.body, m.Payload["count"].(int64), 10)
		p.body = append(p.body, '\t')
		p.body = append(p.body, m.ID...)
		p.body = append(p.body, '\n')
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, p.url, bytes.NewReader(p.body))
	resp, err := p.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("HTTP %d: %s", resp.StatusCode, out.String())
	}
}

// BenchmarkInsertRows interleaves the three paths batch by batch (each
// into its own table), so that the server's and the machine's swings hit
// them alike, and reports each path's rows/s over the same run.
func BenchmarkInsertRows(b *testing.B) {
	srv := chserver.Shared(b)
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			tsv := newSinkPath(b, srv, n, clickhouse.FormatTabSeparated)
			json := newSinkPath(b, srv, n, clickhouse.FormatJSONEachRow)
			raw := newHTTPPath(b, srv)
			var took [3]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				msgs := benchMessages(uint64(i+1), n)
				t0 := time.Now()
				tsv.send(b, msgs)
				t1 := time.Now()
				json.send(b, msgs)
				t2 := time.Now()
				raw.send(b, msgs)
				took[0], took[1], took[2] = took[0]+t1.Sub(t0), took[1]+t2.Sub(t1), took[2]+time.Since(t2)
			}
			rows := float64(n * b.N)
			b.ReportMetric(rows/took[0].Seconds(), "sink-tsv-rows/s")
			b.ReportMetric(rows/took[1].Seconds(), "sink-json-rows/s")
			b.ReportMetric(rows/took[2].Seconds(), "http-loop-rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
