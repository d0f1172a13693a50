package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// ErrHangingTransaction is wrapped by the error of an exactly-once sink
// that finds a transaction of its own producer still open on a partition of
// its topic right after initializing its transactional id.
var ErrHangingTransaction = errors.New("kafka sink: a transaction of this sink lost its markers")

// checkHanging refuses to write while a transaction of this producer is
// open on a partition of the topic. It runs right after InitProducerID
// (txnWriter.init: at start-up, before a retried write, after the initial
// marker), which ends (commits or aborts) every transaction of the
// transactional id before it answers: a transaction still open then has
// lost its markers on that partition — a broker that stopped while the
// transaction ended can skip them (see the package doc) — and it hangs.
// It is not harmless to
// write past it: the producer's next transaction's commit marker would
// also commit the hanging records, which for an aborted transaction are
// outputs this sink writes again (Kafka would then show them twice); for a
// committed one, aborting it would lose them. Which it was is Kafka's to
// say, so the sink waits for an operator, naming the partition, the
// offset and the producer: the error is retried (logged) until the
// transaction is resolved.
//
// An open transaction of a newer epoch is not hanging: a newer instance
// (or a zombie that initialized the id again) is writing, and this one's
// next write fails fenced.
func (w *txnWriter) checkHanging(ctx context.Context) error {
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	var set kadm.TopicsSet
	set.Add(w.s.params.Topic)
	described, err := w.adm.DescribeProducers(ctx, set)
	if err != nil {
		return fmt.Errorf("describe producers of %s: %w", w.s.params.Topic, err)
	}
	var open []kadm.DescribedProducer
	var failed []string
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			failed = append(failed, fmt.Sprintf("partition %d: %v", p.Partition, p.Err))
			return
		}
		for _, d := range p.ActiveProducers {
			if d.ProducerID == id && d.ProducerEpoch < epoch && d.CurrentTxnStartOffset >= 0 {
				open = append(open, d)
			}
		}
	})
	if len(failed) > 0 {
		sort.Strings(failed)
		return fmt.Errorf("describe producers of %s: %s", w.s.params.Topic, strings.Join(failed, "; "))
	}
	if len(open) == 0 {
		return nil
	}
	sort.Slice(open, func(i, j int) bool { return open[i].Partition < open[j].Partition })
	var b strings.Builder
	for i, d := range open {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "partition %d from offset %d (producer epoch %d)", d.Partition, d.CurrentTxnStartOffset, d.ProducerEpoch)
	}
	return fmt.Errorf("%w: transactional id %s (producer id %d) has a transaction open on topic %s, %s, although initializing the id ended all of them: Kafka skipped its markers and it hangs. Writing past it could show outputs twice or lose them, so the sink waits. Resolve it with kafka-transactions.sh (see connector/kafka's doc)",
		ErrHangingTransaction, w.txnID, id, w.s.params.Topic, b.String())
}
