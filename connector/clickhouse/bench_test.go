package clickhouse_test

// Figures (reported, never asserted): rows/s into a ReplicatedMergeTree on
// the real 18.16 server (+ ZooKeeper) with ClickHouseBatchingSink at
// several batch sizes and both row formats, next to a hand-written loop of
// HTTP INSERTs of the same rows in the same batches. Run:
//
//	go test -run '^$' -bench BenchmarkInsertRows -benchtime 30x ./connector/clickhouse/
//
// One iteration is one batch: the sink's iteration is an epoch that
// distributes max_batch_rows messages, plans them, commits (the harness
// keeps state in memory: the engine's own epoch commit is not included),
// INSERTs the batch and records it in a second epoch.

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
	"github.com/weir-stream/weir/connector/clickhouse/internal/sinkharness"
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

func BenchmarkInsertRows(b *testing.B) {
	srv := chserver.Shared(b)
	for _, n := range []int{100, 1000, 10000} {
		for _, format := range []string{clickhouse.FormatTabSeparated, clickhouse.FormatJSONEachRow} {
			b.Run(fmt.Sprintf("batch=%d/sink-%s", n, format), func(b *testing.B) {
				table := replicated(b, srv)
				s, err := clickhouse.NewBatchingSink(sinkParams(srv.Host(), table, map[string]any{"max_batch_rows": n, "format": format}),
					clickhouse.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				h := sinkharness.New(b)
				h.MustInit(s)
				defer s.Close()
				batches := make([][]*weir.Message, b.N)
				for i := range batches {
					batches[i] = benchMessages(uint64(i+1), n)
				}
				b.ResetTimer()
				start := time.Now()
				var waited time.Duration
				for i := 0; i < b.N; i++ {
					if err := h.Epoch(s, batches[i]...); err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					// Wait for the INSERT (PendingSync turns true), then run
					// the epoch that records it, as the engine does.
					for h.Acked(batches[i][n-1].ID) == 0 {
						for !s.PendingSync() {
							time.Sleep(100 * time.Microsecond)
						}
						waited += time.Since(t0)
						if err := h.Epoch(s); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
				b.ReportMetric(float64(waited.Microseconds())/float64(b.N)/1000, "insert-ms/batch")
			})
		}
		b.Run(fmt.Sprintf("batch=%d/http-loop", n), func(b *testing.B) {
			table := replicated(b, srv)
			batches := make([][]*weir.Message, b.N)
			for i := range batches {
				batches[i] = benchMessages(uint64(i+1), n)
			}
			u := srv.HTTP + "/?" + url.Values{
				"query":              {"INSERT INTO `default`.`" + table + "` (`key`, `count`, `msg_id`) FORMAT TabSeparated"},
				"insert_deduplicate": {"1"},
			}.Encode()
			client := &http.Client{}
			var body []byte
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				// A hand-written encoder: the values are known to need no
				// escaping.
				body = body[:0]
				for _, m := range batches[i] {
					body = append(body, m.Payload["key"].(string)...)
					body = append(body, '\t')
					body = strconv.AppendInt(body, m.Payload["count"].(int64), 10)
					body = append(body, '\t')
					body = append(body, m.ID...)
					body = append(body, '\n')
				}
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, bytes.NewReader(body))
				resp, err := client.Do(req)
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
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
