package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-stream/weir/store"
)

// Table ids. Every store.Table is a key range of the one rows table, named
// by a small integer from the tables table: an int in the primary key
// costs less to compare and store than the name (measured in
// BenchmarkLayout: about a fifth of the server's time per inserted row).
// An id is assigned the first time any process writes to the table and
// never changes or goes away, so each process caches the ids it has seen.
// A read of a table nobody wrote to finds no id and no rows; it does not
// create one.
type tableIDs struct {
	mu  sync.RWMutex
	ids map[store.Table]int32
}

func (t *tableIDs) cached(name store.Table) (int32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.ids[name]
	return id, ok
}

func (t *tableIDs) remember(name store.Table, id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids == nil {
		t.ids = map[store.Table]int32{}
	}
	t.ids[name] = id
}

// tableID returns name's id; with create, it assigns one if the table has
// none yet (committed on its own before it is used, so the id is durable
// before any row names it). Without create, ok reports whether it has one.
func (s *Store) tableID(ctx context.Context, c *pgxpool.Conn, name store.Table, create bool) (id int32, ok bool, err error) {
	if id, ok := s.tables.cached(name); ok {
		return id, true, nil
	}
	q := s.sql.lookupTable
	if create {
		q = s.sql.ensureTable
	}
	err = c.QueryRow(ctx, q, string(name)).Scan(&id)
	if !create && errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.readErr(ctx, "table id of "+string(name), err)
	}
	s.tables.remember(name, id)
	return id, true, nil
}

// txnTableIDs returns the ids of every table txn writes or checks,
// assigning ids to new ones.
func (s *Store) txnTableIDs(ctx context.Context, c *pgxpool.Conn, txn *store.Txn) (map[store.Table]int32, error) {
	ids := map[store.Table]int32{}
	add := func(t store.Table) error {
		if _, ok := ids[t]; ok {
			return nil
		}
		id, _, err := s.tableID(ctx, c, t, true)
		ids[t] = id
		return err
	}
	for _, m := range txn.Mutations() {
		if err := add(m.Table); err != nil {
			return nil, err
		}
	}
	for _, ch := range txn.Checks() {
		if err := add(ch.Table); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
