package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// waitFor polls cond every 5 ms until it holds, failing t after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sessionWaits reports whether session pid waits as the test expects:
// for its client (ClientRead) or for a lock.
func sessionWaits(t *testing.T, s *Store, pid uint32, event string) bool {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = $2", int32(pid), event).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestBarrierEndsStalledCommit: a zombie's commit that stopped in the
// middle of its pipeline — it holds its lease's row lock and its session
// waits for the rest, which never comes — does not block AbortLease
// forever: after StalledCommitTimeout the barrier terminates that session
// (its transaction never reached its Sync: nothing applied), and the
// zombie's commit fails.
func TestBarrierEndsStalledCommit(t *testing.T) {
	url := pgtest.URL(t)
	s, _ := newStore(t, Options{StalledCommitTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	l, err := s.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	zombie, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close(context.WithoutCancel(ctx))
	pl := zombie.PgConn().StartPipeline(ctx)
	pl.SendQueryParams(s.sql.holdLeases, [][]byte{fmt.Appendf(nil, "{%d}", int64(l)), nil}, nil, nil, nil)
	pl.SendQueryParams(s.sql.upsert, [][]byte{[]byte("main"), []byte(`{"\\x6b"}`), []byte(`{"\\x7a"}`)}, nil, nil, nil)
	if err := pl.Flush(); err != nil { // no Sync: the pipeline stops here
		t.Fatal(err)
	}
	waitFor(t, "the zombie's session to hold the lease and wait for its client", func() bool {
		return sessionWaits(t, s, zombie.PgConn().PID(), "ClientRead")
	})

	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.AbortLease(actx, l); err != nil {
		t.Fatalf("AbortLease with a stalled commit holding the lease: %v", err)
	}
	if st, err := s.LeaseState(ctx, l); err != nil || st != store.LeaseAborted {
		t.Fatalf("LeaseState = %v, %v; want aborted", st, err)
	}
	// The zombie finishes its pipeline: its session is gone.
	if err := pl.Sync(); err == nil {
		for {
			res, err := pl.GetResults()
			if err != nil {
				break
			}
			if _, ok := res.(*pgconn.PipelineSync); ok {
				t.Fatal("the stalled commit completed after the barrier")
			}
			if rr, ok := res.(*pgconn.ResultReader); ok {
				if _, err := rr.Close(); err != nil {
					break
				}
			}
		}
	}
	if _, ok, _ := s.Get(ctx, "main", []byte("k")); ok {
		t.Fatal("the stalled commit's write is in the store")
	}
}

// lockKey locks key of table from another session, as a write of the key
// in flight does: it begins a transaction that locks the key's row FOR
// UPDATE, or inserts the key if it is absent (the table must exist).
// unlock rolls the transaction back.
func lockKey(t *testing.T, url string, s *Store, table store.Table, key []byte) (unlock func()) {
	t.Helper()
	ctx := t.Context()
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err == nil {
		q := quoteIdent(s.schema)
		var n int
		err = tx.QueryRow(ctx, `WITH locked AS (SELECT 1 FROM `+q+`.rows WHERE t = (SELECT id FROM `+q+`.tables WHERE name = $1) AND k = $2 FOR UPDATE),
ins AS (INSERT INTO `+q+`.rows (t, k, v) SELECT id, $2, '' FROM `+q+`.tables WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM locked) RETURNING 1)
SELECT (SELECT count(*) FROM locked) + (SELECT count(*) FROM ins)`, string(table), key).Scan(&n)
		if err == nil && n != 1 {
			err = fmt.Errorf("locked %d rows, want 1 (does table %s exist?)", n, table)
		}
	}
	if err != nil {
		holder.Close(context.WithoutCancel(ctx))
		t.Fatalf("lock key %q of %s: %v", key, table, err)
	}
	return func() {
		if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
		holder.Close(context.WithoutCancel(ctx))
	}
}

// TestBarrierWaitsForExecutingCommit: a commit the server is executing
// (here waiting for a check's lock) is never terminated by the barrier's
// watch, however long it takes: the barrier waits, and the commit, which
// saw the lease active, applies.
func TestBarrierWaitsForExecutingCommit(t *testing.T) {
	url := pgtest.URL(t)
	s, _ := newStore(t, Options{StalledCommitTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	l, err := s.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	create := store.NewTxn()
	create.Put("main", []byte("other"), []byte("x")) // the table, for lockKey
	if err := s.Commit(ctx, create); err != nil {
		t.Fatal(err)
	}
	unlock := lockKey(t, url, s, "main", []byte("k"))
	txn := store.NewTxn(l)
	txn.CheckAbsent("main", []byte("k"))
	txn.Put("main", []byte("k"), []byte("v"))
	committed := make(chan error, 1)
	go func() { committed <- s.Commit(ctx, txn) }()
	waitFor(t, "the commit to wait for the check's lock", func() bool { return lockWaiters(t, s) == 1 })
	aborted := make(chan error, 1)
	go func() { aborted <- s.AbortLease(ctx, l) }()
	start := s.stallChecks.Load()
	waitFor(t, "the barrier's watch to look three times", func() bool { return s.stallChecks.Load() >= start+3 })
	select {
	case err := <-aborted:
		t.Fatalf("AbortLease returned (%v) while a commit that saw the lease active was in flight", err)
	default:
	}
	unlock()
	if err := <-committed; err != nil {
		t.Fatalf("the executing commit: %v", err)
	}
	if err := <-aborted; err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get(ctx, "main", []byte("k")); !ok || string(v) != "v" {
		t.Fatalf("k = %q, %v; want v", v, ok)
	}
	var lost *store.LeaseLostError
	txn = store.NewTxn(l)
	txn.Put("main", []byte("after"), []byte("x"))
	if err := s.Commit(ctx, txn); !errors.As(err, &lost) {
		t.Fatalf("commit after the abort: %v, want lease lost", err)
	}
}
