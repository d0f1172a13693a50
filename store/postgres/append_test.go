package postgres

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// appendedKey is the key of row index of the sequence prefix.
func appendedKey(prefix string, index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefix), index)
}

// appendValues appends values to sequence prefix of table "q" in one commit.
func appendValues(t *testing.T, s *Store, prefix string, values ...string) error {
	t.Helper()
	txn := store.NewTxn()
	for _, v := range values {
		txn.Append("q", []byte(prefix), []byte(v))
	}
	return s.Commit(t.Context(), txn)
}

// TestAppendedKeyTaken: appended rows are inserted, not upserted (schema
// version 3): a row that exists under the next index of a sequence —
// something other than an append wrote under its prefix, which the store
// contract forbids — fails the appending commit, rolled back and not
// ambiguous, and the row stays as it was. Version 1's append_rows
// overwrote it (and paid for the upsert on every appended row).
func TestAppendedKeyTaken(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := t.Context()
	if err := appendValues(t, s, "p/", "a", "b"); err != nil {
		t.Fatal(err)
	}
	txn := store.NewTxn()
	txn.Put("q", appendedKey("p/", 2), []byte("not an append"))
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	err := appendValues(t, s, "p/", "c")
	var amb *store.AmbiguousError
	if err == nil || errors.As(err, &amb) || !strings.Contains(err.Error(), "23505") {
		t.Fatalf("append onto a taken key: %v; want a unique violation, not ambiguous", err)
	}
	if v, ok, err := s.Get(ctx, "q", appendedKey("p/", 2)); err != nil || !ok || string(v) != "not an append" {
		t.Fatalf("the taken row: %q, %v, %v; want it unchanged", v, ok, err)
	}
	// Nothing of the failed commit applied: the sequence did not move.
	if err := appendValues(t, s, "other/", "x"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "q", appendedKey("p/", 3)); ok {
		t.Fatal("the failed append left a row")
	}
}

// TestMigrateFromVersion2: a version 2 schema with appended rows migrates
// to version 3 (Init applies 3 alone), and appends go on at the next
// index with the rows before intact.
func TestMigrateFromVersion2(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	schema := pgtest.Schema(t, url)
	q := quoteIdent(schema)
	pgtest.Exec(t, url, "CREATE SCHEMA "+q)
	pgtest.Exec(t, url, "CREATE TABLE "+q+".migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
	for _, m := range migrations[:2] {
		pgtest.Exec(t, url, expand(m.sql, schema))
	}
	pgtest.Exec(t, url, "INSERT INTO "+q+".migrations (version, name) VALUES (1, 'v1'), (2, 'v2')")
	pgtest.Exec(t, url, "INSERT INTO "+q+".tables (name) VALUES ('q')")
	// Two rows appended by version 2's append_rows.
	pgtest.Exec(t, url, "SELECT "+q+".bump_timestamp(NULL)")
	pgtest.Exec(t, url, "SELECT "+q+".append_rows(ARRAY[(SELECT id FROM "+q+".tables WHERE name = 'q')], ARRAY['p/'::bytea], ARRAY[2], ARRAY[1, 1], ARRAY[0, 1], ARRAY['a'::bytea, 'b'::bytea], NULL)")

	applied, err := Init(ctx, url, schema)
	if err != nil || !slices.Equal(applied, []int{3}) {
		t.Fatalf("Init of a version 2 schema: applied %v, %v; want [3]", applied, err)
	}
	s := openSchema(t, url, schema, Options{})
	if err := appendValues(t, s, "p/", "c"); err != nil {
		t.Fatalf("append after the migration: %v", err)
	}
	var got []string
	err = s.Scan(ctx, store.Range{Table: "q", Lo: []byte("p/"), Hi: []byte("p0")}, func(k, v []byte) bool {
		got = append(got, string(v[8:])) // the value after its timestamp
		return true
	})
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("rows after the migration: %q, %v; want [a b c]", got, err)
	}
}
