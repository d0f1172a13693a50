package postgres

// Ambiguous commits: the connection is lost while the server commits, so
// the store cannot tell whether the commit applied. The store must say so
// (*store.AmbiguousError), never guess; the engine resolves the outcome by
// reading the partition_transactions row its every attempt guards
// (runtime/txmanager.go), and a retry of the guarded Txn applies only if the
// first attempt did not. These tests cut real connections: a proxy that
// drops the Sync of a commit's pipeline or the answer after the server
// committed, and pg_terminate_backend on a commit waiting for a lock.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// guardedEpoch is an epoch commit as runtime's txManager builds it: the
// partition_transactions row must hold prev (absent if ""), and the Txn
// moves it to next together with the epoch's state.
func guardedEpoch(prev, next string) *store.Txn {
	txn := store.NewTxn()
	row := []byte("p0")
	if prev == "" {
		txn.CheckAbsent(store.PartitionTransactions, row)
	} else {
		txn.CheckValue(store.PartitionTransactions, row, []byte(prev))
	}
	txn.Put(store.PartitionTransactions, row, []byte(next))
	txn.Put(store.States, []byte("p0/count"), []byte("after-"+next))
	return txn
}

// resolveEpoch reads the row as txManager.resolve does: next means the
// attempt applied, prev that it did not; anything else is a bug.
func resolveEpoch(t *testing.T, s store.Store, prev, next string) bool {
	t.Helper()
	v, ok, err := s.Get(t.Context(), store.PartitionTransactions, []byte("p0"))
	if err != nil {
		t.Fatalf("resolve: read the row: %v", err)
	}
	switch {
	case ok && string(v) == next:
		return true
	case prev == "" && !ok, ok && string(v) == prev:
		return false
	}
	t.Fatalf("resolve: the row holds %q (present %v), neither %q nor %q", v, ok, prev, next)
	return false
}

func wantAmbiguous(t *testing.T, what string, err error) {
	t.Helper()
	var amb *store.AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, store.ErrAmbiguous) || store.Classify(err) != store.ClassAmbiguous {
		t.Fatalf("%s: error %v (class %v), want a *store.AmbiguousError", what, err, store.Classify(err))
	}
}

// wantEpoch checks the row and the state hold epoch e's values.
func wantEpoch(t *testing.T, s store.Store, e string) {
	t.Helper()
	for _, c := range []struct {
		table store.Table
		key   string
		want  string
	}{{store.PartitionTransactions, "p0", e}, {store.States, "p0/count", "after-" + e}} {
		v, ok, err := s.Get(t.Context(), c.table, []byte(c.key))
		if err != nil || !ok || string(v) != c.want {
			t.Fatalf("%s/%s = %q, %v, %v; want %q", c.table, c.key, v, ok, err, c.want)
		}
	}
}

// TestAmbiguousCommitResolved: a connection cut after the server committed
// and one cut before it could are both reported as ambiguous; reading the
// guarded row tells them apart, and retrying the same guarded Txn applies
// it exactly once either way (a conflict when the first attempt applied).
func TestAmbiguousCommitResolved(t *testing.T) {
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, url)
	schema := pgtest.Schema(t, url)
	if _, err := Init(t.Context(), url, schema); err != nil {
		t.Fatal(err)
	}
	s := openSchema(t, proxy.URL, schema, Options{MaxConns: 1})
	ctx := t.Context()
	if err := s.Commit(ctx, guardedEpoch("", "1")); err != nil {
		t.Fatal(err)
	}
	prev := "1"
	for i, c := range []struct {
		cut     pgtest.Cut
		applied bool
	}{
		{pgtest.CutAfterCommit, true},
		{pgtest.CutBeforeSync, false},
		{pgtest.CutAfterCommit, true},
		{pgtest.CutBeforeSync, false},
	} {
		next := fmt.Sprint(i + 2)
		txn := guardedEpoch(prev, next)
		before := proxy.Cuts(c.cut)
		// A commit's pipeline has several statements (the checks, then a
		// write per table); reads and the driver's prepares have one or none.
		proxy.Arm(c.cut, 2)
		err := s.Commit(ctx, txn)
		if proxy.Cuts(c.cut) != before+1 {
			t.Fatalf("epoch %s: the proxy did not cut (%v)", next, c.cut)
		}
		wantAmbiguous(t, fmt.Sprintf("epoch %s, %v", next, c.cut), err)
		if got := resolveEpoch(t, s, prev, next); got != c.applied {
			t.Fatalf("epoch %s, %v: resolved as applied=%v, want %v", next, c.cut, got, c.applied)
		}
		// The guarded retry: refused if the first attempt applied, applied
		// if it did not; never twice.
		err = s.Commit(ctx, txn)
		if c.applied {
			wantConflictErr(t, "retry of an applied epoch", err)
		} else if err != nil {
			t.Fatalf("retry of epoch %s that did not apply: %v", next, err)
		}
		wantEpoch(t, s, next)
		prev = next
	}
}

func wantConflictErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrConflict) || store.Classify(err) != store.ClassRetriable {
		t.Fatalf("%s: %v, want store.ErrConflict", what, err)
	}
}

// TestTerminatedCommitIsAmbiguous: a commit whose backend is terminated
// (pg_terminate_backend: FATAL 57P01) while it waits for a lock is
// ambiguous — the server sends the same FATAL to a session whose COMMIT
// has already taken effect — and the guarded retry applies it once.
func TestTerminatedCommitIsAmbiguous(t *testing.T) {
	url := pgtest.URL(t)
	s, schema := newStore(t, Options{})
	ctx := t.Context()
	if err := s.Commit(ctx, guardedEpoch("", "1")); err != nil {
		t.Fatal(err)
	}
	// Lock the row the epoch's check locks, from another session.
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.WithoutCancel(ctx))
	unlock := lockKey(t, url, s, store.PartitionTransactions, []byte("p0"))
	txn := guardedEpoch("1", "2")
	done := make(chan error, 1)
	go func() { done <- s.Commit(ctx, txn) }()

	// Terminate the commit's backend once it waits for the lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid int32
		err := holder.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%check_rows%'`, schema).Scan(&pid)
		if err == nil {
			if _, err := holder.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the commit never waited for the check's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantAmbiguous(t, "commit of a terminated backend", <-done)
	unlock()
	if resolveEpoch(t, s, "1", "2") {
		t.Fatal("a commit terminated before its checks resolved as applied")
	}
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatalf("guarded retry: %v", err)
	}
	wantConflictErr(t, "a second retry", s.Commit(ctx, txn))
	wantEpoch(t, s, "2")
}
