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
// producer is open on a partition of its topic although its coordinator
// ended it — the state a single Kafka node leaves when it stops while a
// transaction ends and skips its markers (the package doc). The
// producer's next commit would commit those records too, so a new
// instance must refuse to write (ErrHangingTransaction, naming the
// partition and offset) and write nothing; once the operator aborts the
// transaction (the markers kafka-transactions.sh abort writes), it writes
// every message exactly once.
//
// The hanging transaction is made the way Kafka's own tests make one: a
// transactional batch produced to a partition that was never added to the
// transaction (the broker's partition verification off, and an old
// Produce version), so the coordinator never sends it a marker.
func TestRealBrokerHangingTransaction(t *testing.T) {
	testproc.SkipUnlessLong(t)
	c := kafkatest.Start(t, 1, map[string]int32{"out": 2}, map[string]string{"transaction.partition.verification.enable": "false"})
	h := newSinkHarness(t)
	s1 := newTestSink(t, sinkParams(c, nil))
	h.init(s1)
	msgs := messages(100, "k", 0, 20)
	h.writeAll(s1, msgs[:10], msgs[:10])
	txnID := s1.TransactionalID()
	s1.Close()

	// On partition 0, where the sink writes key "k": without the check, its
	// next commit marker there would commit the hanging record too.
	pid, epoch, start := hangTransaction(t, c, txnID, 0)

	s2 := newTestSink(t, sinkParams(c, nil))
	h.init(s2)
	err := h.epoch(s2, msgs[10:]...)
	if !errors.Is(err, ErrHangingTransaction) {
		t.Fatalf("Sync over a hanging transaction: %v, want ErrHangingTransaction", err)
	}
	for _, want := range []string{txnID, "partition 0 from offset", "kafka-transactions.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	s2.Close()
	if n := len(readCommitted(t, c, "out")); n != 10 {
		t.Fatalf("%d records visible after the refused start, want 10", n)
	}

	// The operator aborts it as kafka-transactions.sh abort does: the
	// producer's state on the partition (describe-producers), then an
	// abort marker for its epoch (WriteTxnMarkers).
	adm := kadm.NewClient(newClient(t, c))
	ps, err := adm.DescribeProducers(context.Background(), kadm.TopicsSet{"out": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	coordEpoch := int32(-1)
	ps.EachProducer(func(d kadm.DescribedProducer) {
		if d.ProducerID == pid {
			coordEpoch = d.CoordinatorEpoch
		}
	})
	resp, err := adm.WriteTxnMarkers(context.Background(), kadm.TxnMarkers{
		ProducerID: pid, ProducerEpoch: epoch, Commit: false, CoordinatorEpoch: coordEpoch,
		Topics: kadm.TopicsSet{"out": {0: {}}},
	})
	if err == nil {
		resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
			if p.Err != nil && err == nil {
				err = p.Err
			}
		})
	}
	if err != nil {
		t.Fatalf("abort the hanging transaction (from offset %d): %v", start, err)
	}

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
}

// hangTransaction initializes transactional id txnID (fencing any
// instance) and produces one transactional record to partition of topic
// "out" without adding the partition to the transaction: the coordinator
// knows no transaction, the partition holds an open one. It returns the
// producer id and epoch and the record's offset.
func hangTransaction(t *testing.T, c brokers, txnID string, partition int32) (int64, int16, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 11) // Produce v11: no implicit add (transaction version 2 starts at 12)
	cl := newClient(t, c, kgo.TransactionalID(txnID), kgo.MaxVersions(versions))
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
	req.Version = 11
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "out"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = partition, raw
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("produce the hanging record: %v", err)
	}
	cl.Close()
	return pid, epoch, p.BaseOffset
}
