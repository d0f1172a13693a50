package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-stream/weir/store"
)

// maxTxnBytes bounds the keys and values of one Txn: PostgreSQL refuses a
// parameter (an array of values) above 1 GB; a Txn near that is a bug in
// the caller.
const maxTxnBytes = 512 << 20

// maxCommitAttempts bounds how often a commit is sent again after an
// answer that applied nothing and asks for a retry: the timestamp sequence
// moved up to a clock that ticked on meanwhile, or a lease that looked
// expired but a concurrent ping had extended.
const maxCommitAttempts = 8

// Commit applies txn atomically and durably (see store.Store).
//
// The whole Txn is one batch of statements sent in one round trip and run
// as one implicit transaction (the extended protocol's pipeline up to its
// Sync): PostgreSQL commits it at the Sync, or rolls all of it back at the
// first statement that fails. In order:
//
//  1. hold_leases: lock the prerequisite leases FOR KEY SHARE, failing
//     (WL001) if one is not active — the barrier is described in leases.go;
//  2. check_rows: lock the checked keys (an existing row FOR UPDATE, an
//     absent key by claiming it with a placeholder row), in (table, key)
//     order, and evaluate the checks on the locked rows (WC001 if one
//     fails): no commit, checked or not, writes a checked key between its
//     check and the end of this transaction (store.Check);
//  3. the range deletions, the point deletions and the puts, one statement
//     per table for each kind (unnest of key and value arrays);
//  4. append_rows: the appended rows, with their indexes and timestamps.
//
// The Txn's mutations are first reduced to their effect (plan): later
// mutations of a key win, a range deletion drops the earlier writes it
// covers, so the statements can run by kind. Appends always come last, as
// in Pebble's batches.
//
// Errors: WL001 becomes a *store.LeaseLostError once the lease's end has
// passed its barrier (or, if a concurrent ping had just extended the
// lease, the commit is sent again); WC001 is store.ErrConflict; WT001 (the
// timestamp sequence behind the clock) moves the sequence up and sends the
// commit again, and so does a deadlock (40P01): a checked commit locks its
// checked keys before the keys it writes, so a commit that writes a key
// another one checks while checking (or writing) a key that one writes
// closes a cycle, which the server breaks after deadlock_timeout by
// rolling one of them back. Everything else is classified by commitErr: a
// connection lost after the batch was sent is a *store.AmbiguousError.
func (s *Store) Commit(ctx context.Context, txn *store.Txn) error {
	if txn == nil {
		return errors.New("postgres store: commit of a nil Txn")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := txn.Validate(); err != nil {
		return fmt.Errorf("postgres store: commit: %w", err)
	}
	if n := txn.Bytes(); n > maxTxnBytes {
		return fmt.Errorf("postgres store: commit: txn of %d bytes exceeds the limit of %d", n, maxTxnBytes)
	}
	if txn.Empty() && len(txn.Prerequisites()) == 0 {
		if s.closed.Load() {
			return store.ErrClosed
		}
		return nil
	}
	c, err := s.acquire(ctx, "commit")
	if err != nil {
		return err
	}
	defer c.Release()
	ids, err := s.txnTableIDs(ctx, c, txn)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		// Planned per attempt: a retry sends the clock's current time
		// (Options.Clock).
		p, err := s.plan(txn, ids)
		if err != nil {
			return err
		}
		if err = c.SendBatch(ctx, p.batch).Close(); err == nil {
			return nil
		}
		switch code := pgCode(err); {
		case code == codeCheckFailed:
			return fmt.Errorf("postgres store: %s: %w", checkFailure(err), store.ErrConflict)
		case code == codeTimestampBehind:
			if _, err := s.bump(ctx, c); err != nil {
				return err
			}
		case code == codeDeadlock:
			// The server broke a lock cycle by rolling this commit back;
			// the other side holds its locks until it ends, so the next
			// attempt usually finds them free.
		case code == codeLeaseLost:
			for _, id := range p.leases {
				st, err := s.finalState(ctx, c, store.LeaseID(id))
				if err != nil {
					return err
				}
				if st != store.LeaseActive {
					return &store.LeaseLostError{Lease: store.LeaseID(id), State: st}
				}
			}
		default:
			return s.commitErr(err)
		}
		// Nothing was applied (a server ERROR rolled the transaction
		// back): sending the same batch again is safe.
		if attempt >= maxCommitAttempts {
			return store.Retriable(fmt.Errorf("postgres store: commit: no attempt of %d applied: %w", attempt, err))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// checkFailure describes a WC001 error: the function's message names the
// check.
func checkFailure(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// commitPlan is a Txn reduced to the statements that apply it.
type commitPlan struct {
	leases []int64 // sorted, distinct
	batch  *pgx.Batch
}

// point is a Put or Delete of a Txn.
type point struct {
	idx   int // the mutation's position in the Txn
	table store.Table
	key   []byte
	value []byte
	del   bool
	// covered: a later DeleteRange of the Txn covers the key.
	covered bool
}

// rangeDel is a DeleteRange of a Txn.
type rangeDel struct {
	idx    int
	table  store.Table
	lo, hi []byte
}

func (r rangeDel) covers(p *point) bool {
	return r.idx > p.idx && r.contains(p.table, p.key)
}

// contains reports whether the range deletes key of table.
func (r rangeDel) contains(table store.Table, key []byte) bool {
	return r.table == table && bytes.Compare(key, r.lo) >= 0 && (r.hi == nil || bytes.Compare(key, r.hi) < 0)
}

// seqRows are the rows a Txn appends to one sequence, in order.
type seqRows struct {
	table  store.Table
	prefix []byte
	values [][]byte
}

// plan reduces txn to its statements (see Commit): the range deletions
// first, then per table the keys whose last write is a Delete, and those
// whose last write is a Put with its value, sorted by key (the order their
// rows are locked in); a key whose last write a later DeleteRange covers
// is left to the range deletion. Appends come last.
// ids holds the id of every table txn names (txnTableIDs).
func (s *Store) plan(txn *store.Txn, ids map[store.Table]int32) (*commitPlan, error) {
	p := &commitPlan{batch: &pgx.Batch{}}
	for _, id := range txn.Prerequisites() {
		p.leases = append(p.leases, dbLeaseID(id))
	}
	slices.Sort(p.leases)
	p.leases = slices.Compact(p.leases)

	var (
		ranges   []rangeDel
		points   = make([]point, 0, txn.Len())
		seqs     []*seqRows
		seqByKey map[string]*seqRows
	)
	for i, m := range txn.Mutations() {
		switch m.Kind {
		case store.Put, store.Delete:
			points = append(points, point{idx: i, table: m.Table, key: m.Key, value: m.Value, del: m.Kind == store.Delete})
		case store.DeleteRange:
			ranges = append(ranges, rangeDel{idx: i, table: m.Table, lo: m.Key, hi: m.End})
		case store.Append:
			if seqByKey == nil {
				seqByKey = map[string]*seqRows{}
			}
			k := string(m.Table) + "\x00" + string(m.Key)
			q := seqByKey[k]
			if q == nil {
				q = &seqRows{table: m.Table, prefix: m.Key}
				seqByKey[k] = q
				seqs = append(seqs, q)
			}
			q.values = append(q.values, nonNil(m.Value))
		default:
			return nil, fmt.Errorf("postgres store: commit: mutation %d: unsupported mutation kind %d", i, m.Kind)
		}
	}
	for i := range points {
		for _, r := range ranges {
			if r.covers(&points[i]) {
				points[i].covered = true
				break
			}
		}
	}
	// Stable: the writes of one key stay in Txn order, the last one last.
	slices.SortStableFunc(points, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.table, b.table), bytes.Compare(a.key, b.key))
	})

	b := p.batch
	now := s.nowParam()
	if len(p.leases) > 0 {
		b.Queue(s.sql.holdLeases, p.leases, now)
	}
	if len(txn.Checks()) > 0 {
		b.Queue(s.sql.checkRows, checkArgs(txn.Checks(), ids, points, ranges)...)
	}
	for _, r := range ranges {
		if r.hi == nil {
			b.Queue(s.sql.deleteRangeToEnd, ids[r.table], nonNil(r.lo))
		} else {
			b.Queue(s.sql.deleteRange, ids[r.table], nonNil(r.lo), r.hi)
		}
	}
	for lo := 0; lo < len(points); {
		table := points[lo].table
		var delKeys, putKeys, putVals [][]byte
		hi := lo
		for ; hi < len(points) && points[hi].table == table; hi++ {
			pt := &points[hi]
			if hi+1 < len(points) && points[hi+1].table == table && bytes.Equal(points[hi+1].key, pt.key) {
				continue // a later write of the key decides
			}
			switch {
			case pt.covered:
			case pt.del:
				delKeys = append(delKeys, pt.key)
			default:
				putKeys = append(putKeys, pt.key)
				putVals = append(putVals, nonNil(pt.value))
			}
		}
		if len(delKeys) > 0 {
			b.Queue(s.sql.deleteKeys, ids[table], delKeys)
		}
		if len(putKeys) > 0 {
			b.Queue(s.sql.upsert, ids[table], putKeys, putVals)
		}
		lo = hi
	}
	if len(seqs) > 0 {
		b.Queue(s.sql.appendRows, appendArgs(seqs, ids, now)...)
	}
	return p, nil
}

// checkArgs are check_rows' arguments: the checks sorted by (table id,
// key) — the order every commit locks checked keys in, so that checked
// commits do not deadlock on them — with, per check, whether the Txn
// writes the key (a point write or a range deletion covering it: that
// write replaces check_rows' placeholder of an absent key) and its index
// in the Txn. points are the Txn's point writes, sorted by plan.
func checkArgs(checks []store.Check, ids map[store.Table]int32, points []point, ranges []rangeDel) []any {
	order := make([]int, len(checks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ids[checks[a].Table], ids[checks[b].Table]), bytes.Compare(checks[a].Key, checks[b].Key))
	})
	var (
		tids   = make([]int32, len(checks))
		keys   = make([][]byte, len(checks))
		vals   = make([][]byte, len(checks))
		absent = make([]bool, len(checks))
		keep   = make([]bool, len(checks))
		idx    = make([]int32, len(checks))
	)
	for j, i := range order {
		c := checks[i]
		tids[j], keys[j], vals[j], absent[j], idx[j] = ids[c.Table], c.Key, nonNil(c.Value), c.Absent, int32(i)
		keep[j] = writes(points, ranges, c.Table, c.Key)
	}
	return []any{tids, keys, vals, absent, keep, idx}
}

// writes reports whether the Txn whose point writes are points (sorted
// by table and key, as plan sorts them) and whose range deletions are
// ranges puts or deletes key of table.
func writes(points []point, ranges []rangeDel, table store.Table, key []byte) bool {
	if _, ok := slices.BinarySearchFunc(points, key, func(p point, key []byte) int {
		return cmp.Or(cmp.Compare(p.table, table), bytes.Compare(p.key, key))
	}); ok {
		return true
	}
	for _, r := range ranges {
		if r.contains(table, key) {
			return true
		}
	}
	return false
}

// appendArgs are append_rows' arguments for seqs: sequences sorted by
// (table, prefix) — the order their tail rows are locked in — and each
// value's sequence (1-based) and position within it.
func appendArgs(seqs []*seqRows, ids map[store.Table]int32, now *int64) []any {
	slices.SortFunc(seqs, func(a, b *seqRows) int {
		if c := bytes.Compare([]byte(a.table), []byte(b.table)); c != 0 {
			return c
		}
		return bytes.Compare(a.prefix, b.prefix)
	})
	var (
		tids     []int32
		prefixes [][]byte
		counts   []int32
		seqidx   []int32
		pos      []int32
		vals     [][]byte
	)
	for j, q := range seqs {
		tids = append(tids, ids[q.table])
		prefixes = append(prefixes, nonNil(q.prefix))
		counts = append(counts, int32(len(q.values)))
		for i, v := range q.values {
			seqidx = append(seqidx, int32(j+1))
			pos = append(pos, int32(i))
			vals = append(vals, v)
		}
	}
	return []any{tids, prefixes, counts, seqidx, pos, vals, now}
}
