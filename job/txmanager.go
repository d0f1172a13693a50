package job

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/store"
)

// txManager commits a job's epochs (Flow's TTransactionManager). Every
// commit names the job's lease as a prerequisite and writes the partition's
// partition_transactions row with the epoch's timestamp, and every attempt —
// the first included — checks that the row still holds the previous epoch's
// value (absent before the partition's first commit). That check, evaluated
// atomically with the commit, is what lets at most one attempt of an epoch
// ever apply: a store may report an attempt's outcome as unknown and still
// apply it later (a networked store; see storetest's GuardedTxnAppliesOnce),
// and such a late attempt then finds the row moved and writes nothing.
//
// An ambiguous outcome is resolved by reading the row: this epoch's
// timestamp means the commit applied; the previous value means it has not
// applied (yet), and the epoch is committed again — the guard makes a late
// landing of the earlier attempt and the retry mutually exclusive.
//
// It also decides when an idle job must probe its lease: at least once per
// lease_check_period, jittered by ±20% so that many idle jobs do not probe in
// lock step.
type txManager struct {
	st        store.Store
	partition string
	lease     store.LeaseID
	period    time.Duration
	rnd       *rand.Rand
	now       func() time.Time

	last      store.Timestamp // the row's committed value
	nextProbe time.Time

	// resolveAttempts bounds the reads that try to resolve an ambiguous commit.
	resolveAttempts int
	// Stats for tests and metrics.
	ambiguous, resolvedApplied, resolvedRetried int
	logf                                        func(format string, args ...any)
}

func newTxManager(st store.Store, partition string, lease store.LeaseID, period time.Duration, rnd *rand.Rand) *txManager {
	return &txManager{st: st, partition: partition, lease: lease, period: period, rnd: rnd, now: st.Now, resolveAttempts: 5,
		logf: func(string, ...any) {}}
}

func (m *txManager) rowKey() []byte { return []byte(m.partition) }

// init reads the partition's row and commits the job's first, nearly empty
// transaction: it proves the lease is active before the job loads anything.
func (m *txManager) init(ctx context.Context, ts store.Timestamp) error {
	v, ok, err := m.st.Get(ctx, store.PartitionTransactions, m.rowKey())
	if err != nil {
		return fmt.Errorf("read partition_transactions of %s: %w", m.partition, err)
	}
	if ok {
		last, _, err := codec.Uint64BE(v)
		if err != nil {
			return fmt.Errorf("partition_transactions of %s: %w", m.partition, err)
		}
		m.last = store.Timestamp(last)
	}
	return m.commit(ctx, store.NewTxn(m.lease), ts)
}

// commit commits txn as the epoch with timestamp ts. It adds the guard on
// the partition_transactions row and the row's new value; txn must have been
// created with the lease.
func (m *txManager) commit(ctx context.Context, txn *store.Txn, ts store.Timestamp) error {
	invariants.Check(ts > m.last, "partition %s: epoch timestamp %d not above the previous %d", m.partition, ts, m.last)
	if m.last == 0 {
		txn.CheckAbsent(store.PartitionTransactions, m.rowKey())
	} else {
		txn.CheckValue(store.PartitionTransactions, m.rowKey(), codec.AppendUint64BE(nil, uint64(m.last)))
	}
	txn.Put(store.PartitionTransactions, m.rowKey(), codec.AppendUint64BE(nil, uint64(ts)))
	err := m.st.Commit(ctx, txn)
	for attempt := 0; store.Classify(err) == store.ClassAmbiguous; attempt++ {
		m.ambiguous++
		applied, rerr := m.resolve(ctx, ts)
		if rerr != nil {
			return fmt.Errorf("%w; resolving it failed: %v", err, rerr)
		}
		if applied {
			m.resolvedApplied++
			m.logf("%s: commit outcome unknown (%v); the partition_transactions row shows this epoch: applied", m.partition, err)
			err = nil
			break
		}
		if attempt >= 3 {
			return fmt.Errorf("epoch commit of %s stayed ambiguous after %d attempts: %w", m.partition, attempt+1, err)
		}
		m.resolvedRetried++
		m.logf("%s: commit outcome unknown (%v); the partition_transactions row still shows the previous epoch: committing again", m.partition, err)
		err = m.st.Commit(ctx, txn)
		if errors.Is(err, store.ErrConflict) {
			// The row moved: an earlier attempt applied after all.
			applied, rerr := m.resolve(ctx, ts)
			if rerr == nil && applied {
				err = nil
			}
		}
	}
	if err != nil {
		return err
	}
	m.last = ts
	m.scheduleProbe()
	return nil
}

// resolve reads the row to learn whether the commit of ts applied.
func (m *txManager) resolve(ctx context.Context, ts store.Timestamp) (bool, error) {
	var lastErr error
	for i := 0; i < m.resolveAttempts; i++ {
		v, ok, err := m.st.Get(ctx, store.PartitionTransactions, m.rowKey())
		if err != nil {
			lastErr = err
			continue
		}
		if !ok {
			if m.last == 0 {
				return false, nil
			}
			return false, fmt.Errorf("partition_transactions row of %s is missing", m.partition)
		}
		got, _, err := codec.Uint64BE(v)
		if err != nil {
			return false, err
		}
		switch store.Timestamp(got) {
		case ts:
			return true, nil
		case m.last:
			return false, nil
		default:
			return false, fmt.Errorf("partition_transactions row of %s holds %d, neither this epoch (%d) nor the previous (%d): another job committed", m.partition, got, ts, m.last)
		}
	}
	return false, fmt.Errorf("reading partition_transactions of %s: %w", m.partition, lastErr)
}

func (m *txManager) scheduleProbe() {
	jitter := 0.8 + 0.4*m.rnd.Float64()
	m.nextProbe = m.now().Add(time.Duration(float64(m.period) * jitter))
}

// probeDue reports whether an idle job must commit an empty transaction now.
func (m *txManager) probeDue() bool { return !m.now().Before(m.nextProbe) }
