package postgres

// The store conformance suite (store/storetest) on a real PostgreSQL: the
// server of DATABASE_URL, or a throwaway one pgtest starts. Every store
// the suite opens is a fresh schema; Reopen closes the pool and opens the
// same schema again, as a process restart would.

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
	"github.com/weir-stream/weir/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness remembers the schema of each store it opened, for Reopen.
type harness struct {
	mu      sync.Mutex
	schemas map[store.Store]string
}

// openSchema opens the store in schema with the given options (Clock set
// by the caller) and closes it when t ends.
func openSchema(t testing.TB, url, schema string, opts Options) *Store {
	t.Helper()
	opts.Schema = schema
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newStore initializes a fresh schema and opens a store on it.
func newStore(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	if _, err := Init(t.Context(), url, schema); err != nil {
		t.Fatalf("Init(%s): %v", schema, err)
	}
	return openSchema(t, url, schema, opts), schema
}

func (h *harness) Harness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, clk *clock.Manual) store.Store {
			s, schema := newStore(t, Options{Clock: clk})
			h.mu.Lock()
			h.schemas[s] = schema
			h.mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s store.Store, clk *clock.Manual) store.Store {
			h.mu.Lock()
			schema := h.schemas[s]
			h.mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatalf("Close before reopen: %v", err)
			}
			r := openSchema(t, pgtest.URL(t), schema, Options{Clock: clk})
			h.mu.Lock()
			h.schemas[r] = schema
			h.mu.Unlock()
			return r
		},
		PersistentLeases: true,
		Hold: func(t *testing.T, s store.Store, txn *store.Txn) func() error {
			return holdCommit(t, s.(*Store), txn)
		},
		Waiting: func(t *testing.T, s store.Store) bool {
			return lockWaiters(t, s.(*Store)) > 0
		},
	}
}

// holdCommit sends txn's batch — the statements Commit sends, with its
// checks and locks — in an explicit transaction and leaves it open: its
// row locks held, none of its writes visible. finish commits it.
func holdCommit(t *testing.T, s *Store, txn *store.Txn) (finish func() error) {
	t.Helper()
	_, finish = holdCommitTx(t, s, txn)
	return finish
}

// holdCommitTx is holdCommit that also returns the open transaction.
func holdCommitTx(t *testing.T, s *Store, txn *store.Txn) (pgx.Tx, func() error) {
	t.Helper()
	ctx := t.Context()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.txnTableIDs(ctx, c, txn)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	p, err := s.plan(txn, ids)
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err == nil {
		if err = tx.SendBatch(ctx, p.batch).Close(); err != nil {
			tx.Rollback(ctx)
		}
	}
	if err != nil {
		c.Release()
		t.Fatalf("hold a commit in flight: %v", err)
	}
	var once sync.Once
	end := func(commit bool) (err error) {
		once.Do(func() {
			defer c.Release()
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(context.Background())
			}
		})
		return err
	}
	// A test that stops before finish: roll back, so the pool can close.
	t.Cleanup(func() { end(false) })
	return tx, func() error { return end(true) }
}

// lockWaiters counts the sessions that wait for a lock in a statement of
// s's schema.
func lockWaiters(t testing.TB, s *Store) int {
	t.Helper()
	var n int
	err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, quoteIdent(s.schema)+".").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformance(t *testing.T) {
	storetest.Run(t, (&harness{schemas: map[store.Store]string{}}).Harness())
}
