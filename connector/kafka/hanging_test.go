package kafka

import (
	"context"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-stream/weir/internal/kafkabroker/kafkatest"
	"github.com/weir-stream/weir/internal/testproc"
)

// TestRealBrokerHangingTransaction: a transaction of the sink's own
// producer is open although its coordinator ended it — the state a single
// Kafka node leaves when it stops while a transaction ends and skips its
// markers (the package doc) — on an output partition, or on the marker
// group's offsets. On an output partition the producer's next commit
// would commit those records too; on the group, the marker never becomes
// stable. A new instance must refuse to write (ErrHangingTransaction,
// naming what hangs) and write nothing; once the operator aborts the
// transaction (the markers kafka-transactions.sh abort writes), it writes
// every message exactly once.
//
// The hanging transaction is made the way Kafka's own tests make one: a
// transactional write to a partition (or a group) never added to the
// transaction — the broker's verification off, old request versions — so
// the coordinator never sends it a marker.
func TestRealBrokerHangingTransaction(t *testing.T) {
	testproc.SkipUnlessLong(t)
	kafkatest.Require(t)
	for _, tc := range []struct {
		name string
		// hang leaves the transaction open with the sink's producer id and
		// epoch, and returns the topic of the partition it hangs on.
		hang func(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16) string
		// want is what the refusal must name.
		want []string
	}{
		// On partition 0, where the sink writes key "k": without the check,
		// its next commit marker there would commit the hanging record too.
		{"output-partition", produceUnadded, []string{"partition 0 from offset", "kafka-transactions.sh"}},
		{"marker-group", commitOffsetUnadded, []string{"UNSTABLE_OFFSET_COMMIT", "hangs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := kafkatest.Start(t, 1, map[string]int32{"out": 2}, map[string]string{"transaction.partition.verification.enable": "false"})
			h := newSinkHarness(t)
			s1 := newTestSink(t, sinkParams(c, nil))
			h.init(s1)
			msgs := messages(100, "k", 0, 20)
			h.writeAll(s1, msgs[:10], msgs[:10])
			txnID := s1.TransactionalID()
			s1.Close()

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			versions := kversion.Stable()
			versions.SetMaxKeyVersion(int16(kmsg.Produce), 11)        // 12 adds the partition implicitly (transaction version 2)
			versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4) // 5 adds the group implicitly
			cl := newClient(t, c, kgo.TransactionalID(txnID), kgo.MaxVersions(versions))
			pid, epoch, err := cl.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			topic := tc.hang(t, cl, txnID, pid, epoch)
			cl.Close()

			s2 := newTestSink(t, sinkParams(c, nil))
			h.init(s2)
			err = h.epoch(s2, msgs[10:]...)
			if !errors.Is(err, ErrHangingTransaction) {
				t.Fatalf("Sync over a hanging transaction: %v, want ErrHangingTransaction", err)
			}
			for _, want := range append(tc.want, txnID) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			s2.Close()
			if n := len(readCommitted(t, c, "out")); n != 10 {
				t.Fatalf("%d records visible after the refused start, want 10", n)
			}

			abortHanging(t, c, topic, pid, epoch)

			s3 := newTestSink(t, sinkParams(c, nil))
			h.init(s3)
			h.writeAll(s3, msgs[10:], msgs)
			recs := readCommitted(t, c, "out")
			for _, r := range recs {
				if string(r.Value) == "hanging" {
					t.Errorf("the aborted hanging record is visible at offset %d", r.Offset)
				}
			}
			checkOnce(t, payloadNs(t, recs), 20)
		})
	}
}

// produceUnadded produces one transactional record to partition 0 of "out"
// without adding the partition to the transaction.
func produceUnadded(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16) string {
	t.Helper()
	rec := kmsg.NewRecord()
	rec.Key, rec.Value = []byte("k"), []byte("hanging")
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // the varint 0 of Length is one byte
	body = rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, NumRecords: 1, Records: body}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)                                            // after FirstOffset and Length
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // from Attributes on
	raw = b.AppendTo(nil)

	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "out"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 0, raw
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	mustRequest(t, cl, req, "produce the hanging record", func(r *kmsg.ProduceResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode })
	return "out"
}

// commitOffsetUnadded commits an offset of the sink's marker group
// transactionally without adding the group to the transaction.
func commitOffsetUnadded(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16) string {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, txnID, pid, epoch
	req.Generation, req.MemberID = -1, ""
	tp := kmsg.NewTxnOffsetCommitRequestTopic()
	tp.Topic = "out"
	pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	pp.Partition, pp.Offset, pp.LeaderEpoch = 0, 999, -1
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	mustRequest(t, cl, req, "commit the hanging offset", func(r *kmsg.TxnOffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode })
	return "__consumer_offsets"
}

// mustRequest issues req and fails t on an error, or on the error code
// that code reads from the response.
func mustRequest[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request, what string, code func(R) int16) {
	t.Helper()
	resp, err := cl.Request(context.Background(), req)
	if err == nil {
		err = kerr.ErrorForCode(code(resp.(R)))
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// abortHanging aborts the open transaction of producer pid at epoch on
// topic as kafka-transactions.sh abort does: the producer's state on each
// partition (describe-producers), then an abort marker for its epoch where
// it has a transaction open (WriteTxnMarkers).
func abortHanging(t *testing.T, c brokers, topic string, pid int64, epoch int16) {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(newClient(t, c))
	var set kadm.TopicsSet
	set.Add(topic)
	ps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	aborted := 0
	ps.EachProducer(func(d kadm.DescribedProducer) {
		if d.ProducerID != pid || d.CurrentTxnStartOffset < 0 {
			return
		}
		resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: d.CoordinatorEpoch,
			Topics: kadm.TopicsSet{topic: {d.Partition: {}}}})
		if err == nil {
			resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
				if err == nil {
					err = p.Err
				}
			})
		}
		if err != nil {
			t.Fatalf("abort the hanging transaction on %s/%d from offset %d: %v", topic, d.Partition, d.CurrentTxnStartOffset, err)
		}
		aborted++
	})
	if aborted != 1 {
		t.Fatalf("%d hanging transactions of producer %d aborted on %s, want 1", aborted, pid, topic)
	}
}
