package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
)

// txnWriter is the exactly-once writer: one Kafka transaction per write,
// carrying the records and the progress marker.
//
// The job goroutine uses it in the sink's startup (open, fetchMarker,
// commitInitialMarker), before any write may start (waitWritable); from
// then on only the base's delivery goroutine does.
type txnWriter struct {
	s     *Sink
	txnID string

	cl      *kgo.Client
	adm     *kadm.Client
	topicID [16]byte

	// marker is the highest seqNo known committed to Kafka by this
	// transactional id: read at start-up, then advanced by every committed
	// transaction, re-read after a transaction with an unknown outcome.
	marker connector.SeqNo
	resync bool
}

// marker is a progress marker as read from Kafka.
type marker struct {
	found bool
	valid bool // metadata names this producer and agrees with the offset
	seq   connector.SeqNo
	meta  string
}

func markerMetadata(producer connector.ProducerID, seq connector.SeqNo) string {
	return "weir:1:" + string(producer) + ":" + strconv.FormatUint(uint64(seq), 10)
}

// open creates the transactional client and initializes the
// transactional id: Kafka fences every older producer with the same id
// (their next transactional request fails with PRODUCER_FENCED) and aborts
// the transaction one of them left open, so the marker read after open is
// final — unless a broker lost that transaction's markers, which open
// refuses (checkHanging).
func (w *txnWriter) open(ctx context.Context) error {
	w.close()
	cl, err := kgo.NewClient(w.s.clientOpts(
		kgo.TransactionalID(w.txnID),
		kgo.TransactionTimeout(w.s.params.TransactionTimeout.Std()),
	)...)
	if err != nil {
		return err
	}
	w.cl, w.adm = cl, kadm.NewClient(cl)
	if err := w.init(ctx); err != nil {
		w.close()
		return err
	}
	return nil
}

func (w *txnWriter) init(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	// A coordinator still loading after a broker's (re)start answers
	// COORDINATOR_LOAD_IN_PROGRESS, and franz-go gives up the producer
	// id's initialization; a later call initializes it again.
	if err := retryCoordinator(ctx, func() error { _, _, err := w.cl.ProducerID(ctx); return err }); err != nil {
		return fmt.Errorf("init producer id: %w", err)
	}
	if err := w.checkHanging(ctx); err != nil {
		return err
	}
	if w.topicID != ([16]byte{}) {
		return nil
	}
	// The marker's TxnOffsetCommit names the topic by id from version 6.
	td, err := w.adm.ListTopics(ctx, w.s.params.Topic)
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", w.s.params.Topic, err)
	}
	d, ok := td[w.s.params.Topic]
	if !ok {
		return fmt.Errorf("topic %s does not exist", w.s.params.Topic)
	}
	if d.Err != nil {
		return fmt.Errorf("topic %s: %w", w.s.params.Topic, d.Err)
	}
	w.topicID = d.ID
	return nil
}

func (w *txnWriter) close() {
	if w.cl != nil {
		w.cl.Close()
		w.cl, w.adm = nil, nil
	}
}

// unstableMarkerWait bounds how long fetchMarker waits for the marker's
// group to become stable. It always runs right after InitProducerID, which
// answers only once every transaction of the id has its markers, so a
// group still unstable is not waiting for anything of this sink's: the
// bound, below the controller's lost-job timeout (3 s by default), makes
// the job fail with this reason instead of being replaced for silence.
const unstableMarkerWait = 2 * time.Second

// fetchMarker reads the marker, waiting for pending transactional offset
// commits to resolve (require_stable), for at most unstableMarkerWait.
func (w *txnWriter) fetchMarker(ctx context.Context) (marker, error) {
	ctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	var (
		r        kadm.OffsetResponse
		ok       bool
		unstable time.Time // since when the group answers UNSTABLE_OFFSET_COMMIT
	)
	err := retryCoordinator(ctx, func() error {
		resps, err := w.adm.FetchOffsets(kadm.RequireStable(ctx), w.txnID)
		if err == nil {
			if r, ok = resps.Lookup(w.s.params.Topic, 0); ok {
				err = r.Err
			}
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) {
			return err
		}
		if unstable.IsZero() {
			unstable = time.Now()
		} else if time.Since(unstable) >= unstableMarkerWait {
			// err by %v, not %w: a retriable kerr in the chain would
			// keep retryCoordinator retrying.
			return fmt.Errorf("%w: the progress marker's group %s still answers %v after %v, although initializing the transactional id ended its transactions: a transaction of this sink lost its marker on the group's offsets and hangs, or a newer instance is writing (it then fences this one)",
				ErrHangingTransaction, w.txnID, err, unstableMarkerWait)
		}
		return err
	})
	if errors.Is(err, kerr.GroupIDNotFound) {
		return marker{}, nil // no group: no marker
	}
	if err != nil {
		return marker{}, err
	}
	if !ok || r.At < 0 {
		return marker{}, nil
	}
	m := marker{found: true, seq: connector.SeqNo(r.At), meta: r.Metadata}
	m.valid = r.Metadata == markerMetadata(w.s.loaded.producer, m.seq)
	return m, nil
}

// Write writes the messages not covered by the marker in one transaction.
func (w *txnWriter) Write(ctx context.Context, producer connector.ProducerID, first connector.SeqNo, msgs []*weir.Message) (int, error) {
	if err := w.s.Failure(); err != nil {
		return 0, err
	}
	last := first + connector.SeqNo(len(msgs)) - 1
	if err := w.s.waitWritable(ctx, last); err != nil {
		return 0, err
	}
	if w.resync {
		if err := w.recover(ctx); err != nil {
			return 0, err
		}
	}
	skip := 0
	if w.marker >= first {
		skip = int(min(uint64(len(msgs)), uint64(w.marker-first+1)))
	}
	if skip == len(msgs) {
		return skip, nil // committed by an earlier life or attempt
	}
	recs := make([]*kgo.Record, 0, len(msgs)-skip)
	for _, m := range msgs[skip:] {
		r, err := w.s.record(m)
		if err != nil {
			return skip, w.s.setFatal(fmt.Errorf("kafka sink %s: %w", w.s.sc.SinkID, err))
		}
		recs = append(recs, r)
	}
	tctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	err := w.transact(tctx, producer, recs, last)
	if err == nil {
		w.marker = last
		return len(msgs), nil
	}
	if fencedErr(err) {
		return skip, w.s.setFatal(fmt.Errorf("kafka sink %s: transactional id %s: %w: %w", w.s.sc.SinkID, w.txnID, ErrFenced, err))
	}
	// The next attempt rebuilds the client (initializing the
	// transactional id again aborts whatever is still open and clears any
	// producer state kgo considers failed) and re-reads the marker, since
	// the outcome may be unknown (a commit whose answer was lost).
	w.close()
	w.resync = true
	return skip, fmt.Errorf("transaction of seqNo %d..%d: %w", first+connector.SeqNo(skip), last, err)
}

// transact produces recs and the marker last in one transaction and
// commits it. On error the transaction is aborted (or left for the next
// initialization to abort).
func (w *txnWriter) transact(ctx context.Context, producer connector.ProducerID, recs []*kgo.Record, last connector.SeqNo) error {
	cl := w.cl
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var (
		mu   sync.Mutex
		perr error
	)
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if perr == nil {
					perr = err
				}
				mu.Unlock()
			}
		})
	}
	// EndTransaction does not flush: without Flush, records still buffered
	// would be missing from the commit.
	err := cl.Flush(ctx)
	mu.Lock()
	err = errors.Join(err, perr)
	mu.Unlock()
	if err != nil {
		return w.abort(ctx, fmt.Errorf("produce: %w", err))
	}
	if err := w.commitMarker(ctx, producer, last); err != nil {
		return w.abort(ctx, fmt.Errorf("progress marker: %w", err))
	}
	if h := w.s.opts.beforeCommit; h != nil {
		h()
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return w.abort(ctx, fmt.Errorf("commit: %w", err))
	}
	return nil
}

// abort ends the open transaction with an abort, best effort, and returns
// cause; the caller rebuilds the client anyway.
func (w *txnWriter) abort(ctx context.Context, cause error) error {
	if fencedErr(cause) {
		return cause
	}
	err := w.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = w.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err != nil && fencedErr(err) {
		return fmt.Errorf("%w (abort: %w)", cause, err)
	}
	return cause
}

// recover runs before the write after a failed one: it rebuilds the client
// (initializing the transactional id again, which aborts whatever is still
// open) and re-reads the marker, which tells whether a commit with an
// unknown outcome happened.
func (w *txnWriter) recover(ctx context.Context) error {
	if w.cl == nil {
		if err := w.open(ctx); err != nil {
			return fmt.Errorf("reopen transactional producer %s: %w", w.txnID, err)
		}
	}
	mk, err := w.fetchMarker(ctx)
	if err != nil {
		return fmt.Errorf("re-read progress marker of %s: %w", w.txnID, err)
	}
	if mk.found && mk.valid && mk.seq > w.marker {
		w.marker = mk.seq
	}
	w.resync = false
	return nil
}

// commitMarker adds the progress marker to the open transaction: the
// group is added to the transaction (AddOffsetsToTxn), then its offset on
// partition 0 is committed transactionally (TxnOffsetCommit) with the
// producer's current id and epoch, as a standalone (generation -1)
// commit. kgo commits transactional offsets only for a group it consumes
// in, so the requests are issued directly.
func (w *txnWriter) commitMarker(ctx context.Context, producer connector.ProducerID, seq connector.SeqNo) error {
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = w.txnID, id, epoch, w.txnID
	if err := retryCoordinator(ctx, func() error {
		resp, err := add.RequestWith(ctx, w.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("add offsets to transaction: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = w.txnID, w.txnID, id, epoch
	req.Generation, req.MemberID = -1, ""
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = w.s.params.Topic, w.topicID
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, int64(seq), -1
	meta := markerMetadata(producer, seq)
	p.Metadata = &meta
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return retryCoordinator(ctx, func() error {
		resp, err := req.RequestWith(ctx, w.cl)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// commitInitialMarker commits the marker seq in a transaction of its own
// (no records). kgo does not end a transaction in which it produced
// nothing, so EndTxn is issued directly too; since that may move the
// producer epoch behind kgo's back, the client is rebuilt afterwards.
func (w *txnWriter) commitInitialMarker(ctx context.Context, seq connector.SeqNo) error {
	ctx, cancel := context.WithTimeout(ctx, w.s.params.TransactionTimeout.Std())
	defer cancel()
	if err := w.commitMarker(ctx, w.s.loaded.producer, seq); err != nil {
		return err
	}
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = w.txnID, id, epoch, true
	if err := retryCoordinator(ctx, func() error {
		resp, err := end.RequestWith(ctx, w.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	return w.open(ctx)
}

// retryCoordinator retries fn while a coordinator answers with an error
// that says "not now": CONCURRENT_TRANSACTIONS (the previous transaction
// is still completing) or a retriable error code (kerr.IsRetriable: the
// coordinator is not available, moving or loading — a real broker answers
// so while __consumer_offsets or __transaction_state is being created, or
// after a broker restart — or an offset fetch at require_stable meets a
// pending transactional commit, UNSTABLE_OFFSET_COMMIT). Each request it
// is used for is safe to repeat with the same producer id and epoch. It
// gives up when ctx ends, returning fn's last error.
func retryCoordinator(ctx context.Context, fn func() error) error {
	delay := 10 * time.Millisecond
	for {
		err := fn()
		if err == nil || !(errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err)) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// parseMarkerMetadata splits "weir:1:<producer>:<seq>" (for tests and
// tools).
func parseMarkerMetadata(meta string) (connector.ProducerID, connector.SeqNo, bool) {
	parts := strings.Split(meta, ":")
	if len(parts) != 4 || parts[0] != "weir" || parts[1] != "1" {
		return "", 0, false
	}
	n, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return connector.ProducerID(parts[2]), connector.SeqNo(n), true
}
