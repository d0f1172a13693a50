package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/plan"
)

// BenchmarkCounterPipeline measures end-to-end throughput of the keyed
// counter pipeline (source → Reader → Counter → sync sink) on Pebble on
// disk, fsync on every commit, in both processing modes, and with the
// counts kept in an external state table (ExternalCounter: a read and a
// guarded write of a table row per message) instead of weir.State. Each
// iteration runs a fresh pipeline over 20,000 messages to completion.
//
//	go test -run '^$' -bench CounterPipeline -count 5 ./internal/enginetest
func BenchmarkCounterPipeline(b *testing.B) {
	type variant struct {
		name     string
		mode     plan.ProcessingMode
		external bool
	}
	for _, v := range []variant{{"exactly_once", plan.ExactlyOnce, false}, {"at_least_once_consistent", plan.AtLeastOnceConsistent, false},
		{"exactly_once_external_state", plan.ExactlyOnce, true}} {
		mode := v.mode
		b.Run(v.name, func(b *testing.B) {
			const msgs = 20000
			ctx := context.Background()
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := New(b, Options{Seed: uint64(i), Keys: 1000, Messages: msgs, SourcePartitions: 4,
					CounterPartitions: 4, Workers: 2, BatchRows: 1000, Mode: mode, Compact: true, Clock: clock.Real{}, External: v.external})
				b.StartTimer()
				start := time.Now()
				if err := h.RunToCompletion(ctx, 5*time.Minute); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(msgs*b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}
