package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/weir-stream/weir/store"
)

// maxTxnBytes bounds the encoded size of one Txn. Pebble panics when a batch
// reaches 4 GiB; a Txn anywhere near that is a bug in the caller, so it is
// rejected before a batch is built.
const maxTxnBytes = 1 << 30

// Commit applies txn atomically and durably (see store.Store).
//
// The steps, in lock order (the order prevents deadlocks between commits,
// aborts and checks):
//
//  1. validate txn (store.Txn.Validate, supported mutation kinds, size);
//     nothing is locked yet and nothing is written on failure;
//  2. take checkMu: for writing if txn has checks (serializes checked
//     commits), else for reading if it writes (a write never lands
//     between another commit's check and its write);
//  3. take every prerequisite lease's barrier for reading, in increasing id
//     order, and check the lease is active; a lease found ended fails the
//     commit with a *store.LeaseLostError;
//  4. evaluate the checks against the committed data (store.ErrConflict);
//  5. lock the sequences the Txn appends to (in key order), give the
//     appended rows their indexes and timestamps;
//  6. write the batch with pebbledb.Sync; release checkMu and the
//     sequences as soon as it is visible (before its WAL sync returns: see
//     Commit's visible), the leases once the sync has returned.
//
// Invariant: a lease's barrier is read-held from the moment its state was
// checked until the write has returned, and AbortLease / expiry take it for
// writing, so no write of a commit that saw the lease active can land after
// the lease was reported ended.
//
// An empty Txn (no mutations, no checks) only performs step 3: a lease probe
// with no write and no fsync. A Txn with checks but no mutations performs
// steps 2–4 and writes nothing.
func (s *Store) Commit(ctx context.Context, txn *store.Txn) error {
	if txn == nil {
		return errors.New("pebble store: commit of a nil Txn")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := txn.Validate(); err != nil {
		return fmt.Errorf("pebble store: commit: %w", err)
	}
	for i, m := range txn.Mutations() {
		if m.Kind != store.Put && m.Kind != store.Delete && m.Kind != store.DeleteRange && m.Kind != store.Append {
			return fmt.Errorf("pebble store: commit: mutation %d: unsupported mutation kind %d", i, m.Kind)
		}
	}
	size := encodedSize(txn)
	if size > maxTxnBytes {
		return fmt.Errorf("pebble store: commit: txn of %d encoded bytes exceeds the limit of %d", size, maxTxnBytes)
	}
	if err := s.enterUsable(); err != nil {
		return err
	}
	defer s.exit()

	// checkMu and the sequences are released as soon as the batch is
	// visible, before its WAL sync returns (see visible below); the lease
	// barriers stay held until the commit has returned.
	unlockCheck := func() {}
	switch {
	case len(txn.Checks()) > 0:
		s.checkMu.Lock()
		unlockCheck = s.checkMu.Unlock
	case len(txn.Mutations()) > 0:
		s.checkMu.RLock()
		unlockCheck = s.checkMu.RUnlock
	}
	unlockCheck = onlyOnce(unlockCheck)
	defer unlockCheck()
	release, err := s.leases.hold(s.clock, txn.Prerequisites(), s.brokenCh)
	if err != nil {
		return err
	}
	defer release()

	if err := s.evalChecks(txn.Checks()); err != nil {
		return err
	}
	if len(txn.Mutations()) == 0 {
		return nil
	}
	// Anything that stops the commit before Pebble sees it leaves nothing
	// applied, so a cancellation that arrived while waiting for the locks is
	// still a clean (retriable) failure.
	if err := ctx.Err(); err != nil {
		return err
	}
	seqs, unlockSeqs, err := s.lockSequences(txn)
	if err != nil {
		return err
	}
	unlockSeqs = onlyOnce(unlockSeqs)
	defer unlockSeqs()
	// visible runs once the batch is applied and visible to every reader
	// and commit, before its WAL sync has returned: a later commit may then
	// check it and append after it. That is safe because the WAL is written
	// in commit order (a later commit's sync makes this one durable too) and
	// because a failed sync breaks the Store (markBroken): no later commit
	// is reported durable after a lost one. Holding checkMu through the sync
	// serialized every checked commit on its own fsync (one fsync per epoch
	// of every job, instead of one shared by concurrent commits).
	applied := false
	visible := func() { applied = true; publishTails(seqs); unlockSeqs(); unlockCheck() }
	// Sized once from the estimate, the batch is not grown by doubling,
	// each doubling a copy of all written so far (a 300k-message queue
	// write grew its batch through 124 MB of copies).
	b := s.db.NewBatchWithSize(size)
	defer b.Close()
	muts := txn.Mutations()
	order := insertOrder(muts)
	defer order.release()
	for i := range muts {
		m := &muts[order.at(i)]
		var err error
		switch m.Kind {
		case store.Append:
			continue // added below, with indexes and timestamps
		case store.Put:
			// Encode the row key straight into the batch: no key allocation
			// on the hot path (an epoch commit writes many rows).
			op := b.SetDeferred(len(m.Table)+1+len(m.Key), len(m.Value))
			n := copy(op.Key, m.Table)
			op.Key[n] = tableSep
			copy(op.Key[n+1:], m.Key)
			copy(op.Value, m.Value)
			err = op.Finish()
		case store.Delete:
			err = b.Delete(rowKey(m.Table, m.Key), nil)
		case store.DeleteRange:
			lo, hi := tableBounds(m.Table, m.Key, m.End)
			err = b.DeleteRange(lo, hi, nil)
		default:
			err = fmt.Errorf("unknown mutation kind %d", m.Kind)
		}
		if err != nil {
			return fmt.Errorf("pebble store: commit: build batch: %w", err)
		}
	}
	if seqs != nil {
		undo, err := s.appendRows(b, txn, seqs)
		if err != nil {
			undo()
			return fmt.Errorf("pebble store: commit: append: %w", err)
		}
		if err := s.applyThen(b, visible); err != nil {
			// The Store is broken now. If the batch never became visible,
			// keep the tails honest anyway (the sequences are still locked);
			// if it did (its sync failed), its rows are in the memtable and
			// the tails already moved past them.
			if !applied {
				undo()
			}
			return err
		}
		return nil
	}
	return s.applyThen(b, visible)
}

// order is the order in which a commit adds a transaction's mutations to
// its batch: by row key, when that cannot change the outcome. Pebble
// inserts a batch into the memtable's skiplist in batch order, resuming
// each search from the previous key's place: keys in order are found in a
// few steps, scattered keys (an epoch's states by key hash, its outputs,
// its dedup rows, interleaved) each from the top. A transaction with a
// range deletion keeps its own order (a point write after the deletion
// must stay after it). The sort is stable: two writes of one key keep
// theirs, and the later still wins.
type order struct {
	idx []int32 // nil: the transaction's own order
}

var orderPool = sync.Pool{New: func() any { return new([]int32) }}

func insertOrder(muts []store.Mutation) order {
	if len(muts) < 2 {
		return order{}
	}
	sorted := true
	for i := range muts {
		if muts[i].Kind == store.DeleteRange {
			return order{}
		}
		if i > 0 && sorted && compareRow(&muts[i-1], &muts[i]) > 0 {
			sorted = false
		}
	}
	if sorted {
		return order{}
	}
	p := orderPool.Get().(*[]int32)
	idx := (*p)[:0]
	for i := range muts {
		idx = append(idx, int32(i))
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return compareRow(&muts[a], &muts[b]) })
	*p = idx
	return order{idx: idx}
}

// at is the index of the i-th mutation to add.
func (o order) at(i int) int {
	if o.idx == nil {
		return i
	}
	return int(o.idx[i])
}

func (o order) release() {
	if o.idx != nil {
		idx := o.idx[:0]
		orderPool.Put(&idx)
	}
}

// compareRow orders mutations by row key (table, then key: the order of
// rowKey, see keys.go).
func compareRow(a, b *store.Mutation) int {
	if c := strings.Compare(string(a.Table), string(b.Table)); c != 0 {
		return c
	}
	return bytes.Compare(a.Key, b.Key)
}

// onlyOnce returns a function that calls f the first time it is called and
// does nothing after.
func onlyOnce(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}

// evalChecks fails with store.ErrConflict at the first check that does not
// hold. REQUIRES: checkMu held.
func (s *Store) evalChecks(checks []store.Check) error {
	for i, c := range checks {
		v, ok, err := s.get(c.Table, c.Key)
		if err != nil {
			return fmt.Errorf("pebble store: commit: check %d: %w", i, err)
		}
		switch {
		case c.Absent && ok:
			return fmt.Errorf("pebble store: check %d: key %q of %s exists: %w", i, c.Key, c.Table, store.ErrConflict)
		case !c.Absent && !ok:
			return fmt.Errorf("pebble store: check %d: key %q of %s is absent: %w", i, c.Key, c.Table, store.ErrConflict)
		case !c.Absent && !bytes.Equal(v, c.Value):
			return fmt.Errorf("pebble store: check %d: key %q of %s has another value: %w", i, c.Key, c.Table, store.ErrConflict)
		}
	}
	return nil
}

// apply commits b with pebbledb.Sync. Any failure is reported as a
// *store.AmbiguousError and breaks the Store: Pebble may have written the
// batch to the WAL (and has usually applied it to the memtable), so neither
// this handle's reads nor a retry can be trusted; see the package comment.
//
// Pebble reports a failed batch commit by calling Logger.Fatalf from inside
// DB.Apply; pebbleLogger.Fatalf panics with a fatalPanic, recovered here. No
// Pebble lock is held at that point (the commit pipeline has returned).
func (s *Store) apply(b *pebbledb.Batch) error { return s.applyThen(b, nil) }

// applyThen is apply that calls visible (if not nil) as soon as b is
// visible, before waiting for its WAL sync (pebbledb.DB.ApplyNoSyncWait).
// A failure of the sync is reported like any failed commit: ambiguous, and
// the Store broken. visible is not called if the batch never became
// visible.
func (s *Store) applyThen(b *pebbledb.Batch, visible func()) (err error) {
	if s.readOnly {
		return fmt.Errorf("pebble store: %s is open read-only", s.dir)
	}
	if err := s.roomForBatch(uint64(b.Len())); err != nil {
		return fmt.Errorf("pebble store: commit: %w", err)
	}
	n, err := s.marks.stamp(b)
	if err != nil {
		return fmt.Errorf("pebble store: commit mark: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			switch v := r.(type) {
			case fatalPanic:
				err = v.err
			case error:
				// Pebble's commit path panics on a sticky WAL error when
				// several batches share a failed log block. The batch may or
				// may not be in the log: ambiguous, and the handle is broken.
				// The panic may leave Pebble's mutexes locked: Close must not
				// call into Pebble again.
				err = fmt.Errorf("pebble panicked in commit: %w", v)
				s.wedged.Store(true)
			default:
				panic(r)
			}
		}
		if err != nil {
			s.markBroken(err)
			if isNoSpace(err) {
				err = noSpaceError(s.fs, s.dir, err) // see nospace.go
			}
			err = &store.AmbiguousError{Err: fmt.Errorf("pebble store: commit: %w", err)}
			return
		}
		s.marks.done(n)
	}()
	if visible == nil {
		return s.db.Apply(b, pebbledb.Sync)
	}
	if err := s.db.ApplyNoSyncWait(b, pebbledb.Sync); err != nil {
		return err
	}
	visible()
	return b.SyncWait()
}

// encodedSize estimates the size of txn's Pebble batch from above.
func encodedSize(txn *store.Txn) int {
	const perEntry = 32 // batch record header and varints, generously
	n := 0
	for _, m := range txn.Mutations() {
		n += perEntry + 2*(len(m.Table)+1) + len(m.Key) + len(m.Value) + len(m.End)
	}
	return n
}
