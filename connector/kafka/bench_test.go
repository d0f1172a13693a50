package kafka_test

// BenchmarkKafkaCounter measures, side by side in one run, the throughput
// of the same work done two ways on kfake: count events per key and
// produce each new count, exactly-once.
//
//   - weir: Kafka → Reader (SwiftPassthrough over KafkaSource) → Counter →
//     KafkaSink through engine.New, with the pipeline's state, outbox and
//     offsets in a Pebble store (fsync per epoch commit) and the sink's
//     Kafka transactions after each commit.
//   - franz-go: a hand-written consume-transform-produce loop on
//     kgo.GroupTransactSession: poll, count in memory, produce the counts
//     and commit the consumed offsets in one Kafka transaction per poll.
//     Its counts live only in memory (a restart would lose them), so it
//     does less than weir does; it is the baseline of raw Kafka EOS cost.
//
// Each iteration processes benchEvents events from a fresh cluster (set-up
// excluded) and reports msgs/s.
//
//	go test -run '^$' -bench BenchmarkKafkaCounter -benchtime 3x ./connector/kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir/connector/kafka"
)

const (
	benchEvents = 100000
	benchKeys   = 100
)

func benchInput(b *testing.B) *e2e {
	b.Helper()
	f := newE2E(b)
	cl := kafka.NewClientForTest(b, f.c, kgo.ProducerLinger(0))
	r := rand.New(rand.NewPCG(9, 9))
	recs := make([]*kgo.Record, benchEvents)
	for i := range recs {
		k := fmt.Sprintf("k%03d", r.IntN(benchKeys))
		recs[i] = &kgo.Record{Topic: "events", Key: []byte(k), Value: fmt.Appendf(nil, `{"key":%q}`, k)}
		f.want[k]++
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkKafkaCounter(b *testing.B) {
	b.Run("weir", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			f := benchInput(b)
			specText := counterSpecWith(f.c.ListenAddrs(), "SwiftPassthrough", kafka.SinkClassName, "", 1000)
			b.StartTimer()
			f.run(b, specText, nil)
			b.StopTimer()
			if n := len(kafka.ReadCommittedForTest(b, f.c, "counts")); n != benchEvents {
				b.Fatalf("%d counts, want %d", n, benchEvents)
			}
		}
		b.ReportMetric(float64(b.N*benchEvents)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("franz-go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			f := benchInput(b)
			b.StartTimer()
			groupTransactCounter(b, f)
			b.StopTimer()
			if n := len(kafka.ReadCommittedForTest(b, f.c, "counts")); n != benchEvents {
				b.Fatalf("%d counts, want %d", n, benchEvents)
			}
		}
		b.ReportMetric(float64(b.N*benchEvents)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// groupTransactCounter is the hand-written loop: one transaction per poll.
func groupTransactCounter(b *testing.B, f *e2e) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(f.c.ListenAddrs()...),
		kgo.TransactionalID("bench-counter"),
		kgo.ConsumerGroup("bench-counter"),
		kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("counts"),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	counts := map[string]int64{}
	done := 0
	for done < benchEvents {
		fs := s.PollRecords(ctx, 1000)
		if err := ctx.Err(); err != nil {
			b.Fatal(err)
		}
		fs.EachError(func(t string, p int32, err error) { b.Fatalf("fetch %s/%d: %v", t, p, err) })
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			b.Fatal(err)
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			counts[k]++
			out = append(out, &kgo.Record{Key: r.Key, Value: fmt.Appendf(nil, `{"count":%d,"key":%q}`, counts[k], k)})
		})
		if err := s.ProduceSync(ctx, out...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			b.Fatalf("commit: %v (committed %v)", err, committed)
		}
		done += len(out)
	}
}
