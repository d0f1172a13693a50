package postgres

// Tests of this backend's own mechanisms: the database's clock deciding
// expiry, the timestamp sequence following the clock, the sweep of ended
// leases, schema migrations and the durability guard of Open, and URLs.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// dbNow reads the database's clock.
func dbNow(t *testing.T, s *Store) time.Time {
	t.Helper()
	var ns int64
	if err := s.pool.QueryRow(t.Context(), s.sql.now, nil).Scan(&ns); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}

func leaseRow(t *testing.T, s *Store, id store.LeaseID) (expires time.Time, state int16) {
	t.Helper()
	var ns int64
	err := s.pool.QueryRow(t.Context(), "SELECT expires_ns, state FROM "+quoteIdent(s.schema)+".leases WHERE id = $1", int64(id)).Scan(&ns, &state)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns), state
}

// TestDatabaseClockDecidesExpiry: without Options.Clock, the database's
// clock stamps leases and decides their expiry; the local clock plays no
// part. The lease's expiry is moved into the database's past by hand, so
// the test needs no sleep: commits and pings fail, LeaseState reports it
// expired.
func TestDatabaseClockDecidesExpiry(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := t.Context()
	const timeout = time.Hour
	before := dbNow(t, s)
	l, err := s.CreateLease(ctx, timeout)
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow(t, s)
	exp, _ := leaseRow(t, s, l)
	if exp.Before(before.Add(timeout)) || exp.After(after.Add(timeout)) {
		t.Fatalf("lease expires at %v, want the database's creation time + %v in [%v, %v]", exp, timeout, before.Add(timeout), after.Add(timeout))
	}
	// Now() is the database's clock as seen from here (estimated from the
	// round trips): between two readings up to the estimate's error.
	if now := s.Now(); now.Before(before.Add(-time.Minute)) || now.After(dbNow(t, s).Add(time.Minute)) {
		t.Fatalf("Now() = %v, far from the database's clock (%v)", now, before)
	}
	txn := store.NewTxn(l)
	txn.Put("main", []byte("k"), []byte("1"))
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	// The database's clock passes the expiry.
	if _, err := s.pool.Exec(ctx, "UPDATE "+quoteIdent(s.schema)+".leases SET expires_ns = expires_ns - $2 WHERE id = $1",
		int64(l), 2*timeout.Nanoseconds()); err != nil {
		t.Fatal(err)
	}
	txn = store.NewTxn(l)
	txn.Put("main", []byte("k"), []byte("2"))
	err = s.Commit(ctx, txn)
	var lost *store.LeaseLostError
	if !errors.As(err, &lost) || lost.State != store.LeaseExpired {
		t.Fatalf("commit after the database's clock passed the expiry: %v, want lease lost (expired)", err)
	}
	if err := s.PingLease(ctx, l); !errors.As(err, &lost) {
		t.Fatalf("ping after expiry: %v, want lease lost", err)
	}
	if st, err := s.LeaseState(ctx, l); err != nil || st != store.LeaseExpired {
		t.Fatalf("LeaseState = %v, %v; want expired", st, err)
	}
	if _, state := leaseRow(t, s, l); state != stateExpired {
		t.Fatalf("row state %d, want %d (expired)", state, stateExpired)
	}
	if v, _, _ := s.Get(ctx, "main", []byte("k")); string(v) != "1" {
		t.Fatalf("k = %q, want 1", v)
	}
}

// TestDatabaseClockTimestamps: with the database's clock, timestamps are
// not behind its second and strictly increase.
func TestDatabaseClockTimestamps(t *testing.T) {
	s, _ := newStore(t, Options{})
	var prev store.Timestamp
	for range 50 {
		floor := store.MakeTimestamp(dbNow(t, s))
		ts, err := s.Timestamp(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ts < floor || ts <= prev {
			t.Fatalf("Timestamp %d: floor %d (the database's second), previous %d", ts, floor, prev)
		}
		prev = ts
	}
}

// TestAppendTimestampsFollowTheClock: appended rows get timestamps not
// behind the clock's second, also when the timestamp sequence lags (the
// commit moves it up and is sent again).
func TestAppendTimestampsFollowTheClock(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s, _ := newStore(t, Options{Clock: clk})
	for i := range 3 {
		clk.Advance(time.Duration(i+1) * time.Hour)
		txn := store.NewTxn()
		txn.Append("q", []byte("p"), []byte("v"))
		if err := s.Commit(t.Context(), txn); err != nil {
			t.Fatal(err)
		}
		var ts uint64
		err := s.Scan(t.Context(), store.Range{Table: "q", Reverse: true, Limit: 1}, func(k, v []byte) bool {
			ts = uint64(v[0])<<56 | uint64(v[1])<<48 | uint64(v[2])<<40 | uint64(v[3])<<32 | uint64(v[4])<<24 | uint64(v[5])<<16 | uint64(v[6])<<8 | uint64(v[7])
			return false
		})
		if err != nil {
			t.Fatal(err)
		}
		if store.Timestamp(ts) < store.MakeTimestamp(clk.Now()) {
			t.Fatalf("append %d: timestamp %d behind the clock's second %d", i, ts, store.MakeTimestamp(clk.Now()))
		}
	}
}

// TestEndedLeasesSwept: an ended lease's row is deleted once it has been
// ended longer than EndedLeaseRetention (then it is unknown, which fails
// commits alike); an active one stays.
func TestEndedLeasesSwept(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s, _ := newStore(t, Options{Clock: clk, EndedLeaseRetention: time.Hour})
	ctx := t.Context()
	old, err := s.CreateLease(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AbortLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	live, err := s.CreateLease(ctx, 100*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if st, _ := s.LeaseState(ctx, old); st != store.LeaseAborted {
		t.Fatalf("before the sweep: %v, want aborted", st)
	}
	if _, err := s.CreateLease(ctx, time.Minute); err != nil { // sweeps
		t.Fatal(err)
	}
	if st, _ := s.LeaseState(ctx, old); st != store.LeaseUnknown {
		t.Fatalf("after the sweep: %v, want unknown", st)
	}
	if st, _ := s.LeaseState(ctx, live); st != store.LeaseActive {
		t.Fatalf("active lease after the sweep: %v, want active", st)
	}
	txn := store.NewTxn(old)
	txn.Put("main", []byte("k"), []byte("v"))
	var lost *store.LeaseLostError
	if err := s.Commit(ctx, txn); !errors.As(err, &lost) {
		t.Fatalf("commit with a swept lease: %v, want lease lost", err)
	}
}

// TestMigrations: versions increase from 1 without gaps and end at
// SchemaVersion.
func TestMigrations(t *testing.T) {
	for i, m := range migrations {
		if m.version != i+1 || m.name == "" || m.sql == "" {
			t.Errorf("migration %d: version %d, name %q", i, m.version, m.name)
		}
	}
	if last := migrations[len(migrations)-1].version; last != SchemaVersion {
		t.Errorf("last migration %d, SchemaVersion %d", last, SchemaVersion)
	}
}

// TestInit: Init is idempotent and safe to run concurrently (exactly one
// run applies each migration); Open refuses a schema that is missing, older
// or newer than this build, naming what to do.
func TestInit(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	schema := pgtest.Schema(t, url)

	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "weir store init") {
		t.Fatalf("Open of an uninitialized schema: %v, want an error naming weir store init", err)
	}
	var wg sync.WaitGroup
	applied := make([][]int, 4)
	errs := make([]error, 4)
	for i := range applied {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = Init(ctx, url, schema)
		}()
	}
	wg.Wait()
	total := 0
	for i := range applied {
		if errs[i] != nil {
			t.Fatalf("concurrent Init %d: %v", i, errs[i])
		}
		total += len(applied[i])
	}
	if total != len(migrations) {
		t.Fatalf("concurrent Inits applied %d migrations in all, want %d: %v", total, len(migrations), applied)
	}
	if again, err := Init(ctx, url, schema); err != nil || len(again) != 0 {
		t.Fatalf("Init again: applied %v, %v; want nothing", again, err)
	}
	s := openSchema(t, url, schema, Options{})
	s.Close()

	// A schema from a newer weir is refused by both.
	pgtest.Exec(t, url, "INSERT INTO "+quoteIdent(schema)+".migrations (version, name) VALUES (999, 'from the future')")
	if _, err := Init(ctx, url, schema); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Init of a newer schema: %v", err)
	}
	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	// A newer schema whose step says it still serves this build's version
	// is opened (a rolling upgrade: the new weir store init ran first);
	// one that serves only newer builds is refused, naming the versions.
	pgtest.Exec(t, url, fmt.Sprintf("INSERT INTO %s.readers (version, oldest_reader) VALUES (999, %d)", quoteIdent(schema), SchemaVersion))
	s = openSchema(t, url, schema, Options{})
	s.Close()
	pgtest.Exec(t, url, "UPDATE "+quoteIdent(schema)+".readers SET oldest_reader = 999 WHERE version = 999")
	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version 999, newer than this weir's %d", SchemaVersion)) ||
		!strings.Contains(err.Error(), "serves builds of schema version 999 and later") {
		t.Fatalf("Open of a newer schema that does not serve this build: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var recorded int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM "+quoteIdent(schema)+".readers WHERE version <= $1 AND oldest_reader = version", SchemaVersion).Scan(&recorded)
	conn.Close(ctx)
	if err != nil || recorded != SchemaVersion {
		t.Fatalf("readers rows of this build's steps: %d, %v; want %d", recorded, err, SchemaVersion)
	}
	// An older one asks for a migration.
	pgtest.Exec(t, url, "DELETE FROM "+quoteIdent(schema)+".migrations")
	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "weir store init") {
		t.Fatalf("Open of an empty migrations table: %v", err)
	}
}

// TestOpenRefusesUndurableServer: a session with synchronous_commit=off
// would acknowledge commits before they are durable; Open refuses it.
func TestOpenRefusesUndurableServer(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	if _, err := Init(t.Context(), url, schema); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), pgtest.WithParam(url, "synchronous_commit", "off"), Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "synchronous_commit=off") {
		t.Fatalf("Open with synchronous_commit=off: %v, want a refusal naming it", err)
	}
}

// TestURLSchema: weir_schema selects the schema and never reaches the
// server; a conflict with Options.Schema and a bad name are errors.
func TestURLSchema(t *testing.T) {
	conn, schema, err := ParseURL("postgres://u@h:5/db?sslmode=disable&weir_schema=pipe_1")
	if err != nil || schema != "pipe_1" || strings.Contains(conn, "weir_schema") || !strings.Contains(conn, "sslmode=disable") {
		t.Fatalf("ParseURL = %q, %q, %v", conn, schema, err)
	}
	if _, _, err := ParseURL("mysql://h/db"); err == nil {
		t.Fatal("ParseURL accepted a mysql:// URL")
	}
	for _, c := range []struct{ url, opt string }{{"a", "b"}, {"", "Bad"}, {"1x", ""}, {strings.Repeat("a", 64), ""}} {
		if _, err := pickSchema(c.url, c.opt); err == nil {
			t.Errorf("pickSchema(%q, %q) accepted", c.url, c.opt)
		}
	}
	if got, err := pickSchema("", ""); err != nil || got != DefaultSchema {
		t.Errorf("pickSchema default = %q, %v", got, err)
	}

	url := pgtest.URL(t)
	schema = pgtest.Schema(t, url)
	if _, err := Init(t.Context(), url, schema); err != nil {
		t.Fatal(err)
	}
	// The server refuses unknown settings at connection: opening proves
	// the parameter was removed.
	s := openSchema(t, pgtest.WithParam(url, SchemaParam, schema), "", Options{})
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", s.Schema(), schema)
	}
}

// TestScanWalksTheIndex: the store's scans walk the primary key in order
// and never sort, also on a young table whose statistics make the planner
// underestimate a range (sessionParams' enable_sort=off).
func TestScanWalksTheIndex(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := t.Context()
	for c := range 20 {
		txn := store.NewTxn()
		for r := range 1000 {
			txn.Put("main", fmt.Appendf(nil, "%02d-%04d", c, r), []byte("v"))
		}
		if err := s.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	tid, ok := s.tables.cached("main")
	if !ok {
		t.Fatal("no id for table main after writing to it")
	}
	for _, c := range []struct {
		sql  string
		args []any
	}{
		{s.sql.scanFwd, []any{tid, []byte("05"), int64(1000)}},
		{s.sql.scanRev, []any{tid, []byte("05"), int64(1000)}},
		{s.sql.scanFwdHi, []any{tid, []byte("05"), []byte("09"), int64(1000)}},
		{s.sql.scanRevHi, []any{tid, []byte("05"), []byte("09"), int64(1000)}},
	} {
		rows, err := s.pool.Query(ctx, "EXPLAIN "+c.sql, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, "Index Scan") || strings.Contains(p, "Sort") {
			t.Errorf("plan of %s:\n%s\nwant an index scan without a sort", c.sql, p)
		}
	}
}

// safeErr is an error the driver would mark as failing before anything was
// sent.
type safeErr struct{}

func (safeErr) Error() string     { return "dial: connection refused" }
func (safeErr) SafeToRetry() bool { return true }

// TestCommitErrorClasses: a server ERROR rolled the transaction back
// (retriable if transient, else fatal); a FATAL, a connection or operator
// class, 40003 or a lost connection leave the outcome unknown; a failure
// before sending is retriable.
func TestCommitErrorClasses(t *testing.T) {
	s := &Store{}
	for _, c := range []struct {
		err  error
		want store.Class
	}{
		{&pgconn.PgError{Severity: "ERROR", Code: "23505"}, store.ClassFatal},
		{&pgconn.PgError{Severity: "ERROR", Code: "22001"}, store.ClassFatal},
		{&pgconn.PgError{Severity: "ERROR", Code: "40001"}, store.ClassRetriable},
		{&pgconn.PgError{Severity: "ERROR", Code: "40P01"}, store.ClassRetriable},
		{&pgconn.PgError{Severity: "ERROR", Code: "53300"}, store.ClassRetriable},
		{&pgconn.PgError{Severity: "ERROR", Code: "40003"}, store.ClassAmbiguous},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, store.ClassAmbiguous},
		{&pgconn.PgError{Severity: "ERROR", Code: "57014"}, store.ClassAmbiguous},
		{&pgconn.PgError{Severity: "FATAL", Code: "08006"}, store.ClassAmbiguous},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), store.ClassAmbiguous},
		{fmt.Errorf("write: %w", context.Canceled), store.ClassAmbiguous},
		{safeErr{}, store.ClassRetriable},
	} {
		if got := store.Classify(s.commitErr(c.err)); got != c.want {
			t.Errorf("commitErr(%v) is %v, want %v", c.err, got, c.want)
		}
	}
}

// TestTableIDsAcrossHandles: two handles on one schema (two processes)
// agree on table ids, also when both write a new table at once; reading
// a table nobody wrote to finds nothing and assigns no id.
func TestTableIDsAcrossHandles(t *testing.T) {
	a, schema := newStore(t, Options{})
	b := openSchema(t, pgtest.URL(t), schema, Options{})
	ctx := t.Context()
	for i := range 20 {
		table := store.Table(fmt.Sprintf("t%02d", i))
		errs := make(chan error, 2)
		for j, s := range []*Store{a, b} {
			go func() {
				txn := store.NewTxn()
				txn.Put(table, []byte{byte(j)}, []byte(table))
				errs <- s.Commit(ctx, txn)
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []*Store{a, b} {
			n := 0
			if err := s.Scan(ctx, store.Range{Table: table}, func(k, v []byte) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Fatalf("table %s holds %d rows seen from one handle, want 2 (one per handle)", table, n)
			}
		}
		ida, _ := a.tables.cached(table)
		idb, _ := b.tables.cached(table)
		if ida != idb || ida == 0 {
			t.Fatalf("table %s: ids %d and %d", table, ida, idb)
		}
	}
	if _, ok, err := b.Get(ctx, "never_written", []byte("k")); ok || err != nil {
		t.Fatalf("Get of an unwritten table: %v, %v", ok, err)
	}
	if err := b.Scan(ctx, store.Range{Table: "never_written"}, func(k, v []byte) bool { t.Error("a row"); return true }); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM "+quoteIdent(schema)+".tables WHERE name = 'never_written'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("reads assigned an id to an unwritten table (%d rows, %v)", n, err)
	}
}

// TestMigrateFromVersion1: a schema written by a weir of schema version 1,
// with rows, is refused by Open until Init migrates it; then its checks
// run under row locks (version 2's check_rows) and its rows are intact.
func TestMigrateFromVersion1(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	schema := pgtest.Schema(t, url)
	q := quoteIdent(schema)
	pgtest.Exec(t, url, "CREATE SCHEMA "+q)
	pgtest.Exec(t, url, "CREATE TABLE "+q+".migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
	pgtest.Exec(t, url, expand(migrations[0].sql, schema))
	pgtest.Exec(t, url, "INSERT INTO "+q+".migrations (version, name) VALUES (1, 'v1')")
	pgtest.Exec(t, url, "INSERT INTO "+q+".tables (name) VALUES ('main')")
	pgtest.Exec(t, url, "INSERT INTO "+q+".rows (t, k, v) SELECT id, 'k', 'v' FROM "+q+".tables WHERE name = 'main'")

	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("Open of a version 1 schema: %v, want an error naming the version", err)
	}
	applied, err := Init(ctx, url, schema)
	if err != nil || !slices.Equal(applied, []int{2, 3}) {
		t.Fatalf("Init of a version 1 schema: applied %v, %v; want [2 3]", applied, err)
	}
	s := openSchema(t, url, schema, Options{})
	txn := store.NewTxn()
	txn.CheckValue("main", []byte("k"), []byte("v"))
	txn.CheckAbsent("main", []byte("new"))
	txn.Put("main", []byte("k"), []byte("w"))
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatalf("checked commit after the migration: %v", err)
	}
	if v, ok, err := s.Get(ctx, "main", []byte("k")); err != nil || !ok || string(v) != "w" {
		t.Fatalf("k = %q, %v, %v; want w", v, ok, err)
	}
	if _, ok, _ := s.Get(ctx, "main", []byte("new")); ok {
		t.Fatal("the absent check's placeholder is visible")
	}
}

// TestAbsentCheckClaimsUnwrittenKey: a commit that checks a key absent
// without writing it keeps the key claimed until it ends (check_rows
// inserts a placeholder and deletes it at once: other inserts still wait
// for the inserting transaction). A blind insert of the key made while the
// checked commit is in flight waits for it, so it lands after the check.
func TestAbsentCheckClaimsUnwrittenKey(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := t.Context()
	held := store.NewTxn()
	held.CheckAbsent("main", []byte("k"))
	held.Put("main", []byte("j"), []byte("a"))
	finish := holdCommit(t, s, held)
	blind := store.NewTxn()
	blind.Put("main", []byte("k"), []byte("b"))
	done := make(chan error, 1)
	go func() { done <- s.Commit(ctx, blind) }()
	waitFor(t, "the blind insert to wait for the claim", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the blind insert returned (%v) while the check's claim was held", err)
		default:
		}
		return lockWaiters(t, s) == 1
	})
	if err := finish(); err != nil {
		t.Fatalf("the checked commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the blind insert: %v", err)
	}
	for k, want := range map[string]string{"j": "a", "k": "b"} {
		if v, ok, err := s.Get(ctx, "main", []byte(k)); err != nil || !ok || string(v) != want {
			t.Errorf("%s = %q, %v, %v; want %q", k, v, ok, err, want)
		}
	}
}

// TestCommitRetriesDeadlock: a checked commit locks its checked keys before
// the keys it writes, so two commits can close a lock cycle; the server
// rolls one back (40P01) and Commit sends it again instead of failing.
// Here a commit in flight (a raw transaction) writes j, the store's commit
// locks a and waits for j, then the raw transaction asks for a. The
// server checks a waiter for a cycle once, deadlock_timeout (1 s) after
// it began to wait: if the raw transaction asked for a later than that
// (a loaded machine), the raw transaction is the one rolled back, and the
// round is tried again.
func TestCommitRetriesDeadlock(t *testing.T) {
	s, _ := newStore(t, Options{})
	for round := 1; ; round++ {
		if deadlockRound(t, s) {
			return
		}
		if round == 5 {
			t.Fatal("in 5 rounds the store's commit was never the one the server rolled back")
		}
	}
}

// deadlockRound runs one round of TestCommitRetriesDeadlock: false if the
// raw transaction lost the deadlock (the round proved nothing).
func deadlockRound(t *testing.T, s *Store) bool {
	ctx := t.Context()
	init := store.NewTxn()
	for _, k := range []string{"a", "j", "k"} {
		init.Put("main", []byte(k), []byte("1"))
	}
	if err := s.Commit(ctx, init); err != nil {
		t.Fatal(err)
	}
	held := store.NewTxn()
	held.CheckValue("main", []byte("k"), []byte("1"))
	held.Put("main", []byte("j"), []byte("2"))
	tx, finish := holdCommitTx(t, s, held)
	txn := store.NewTxn()
	txn.CheckValue("main", []byte("a"), []byte("1"))
	txn.CheckValue("main", []byte("j"), []byte("2"))
	txn.Put("main", []byte("a"), []byte("2"))
	done := make(chan error, 1)
	go func() { done <- s.Commit(ctx, txn) }()
	waitFor(t, "the commit to lock a and wait for j", func() bool { return lockWaiters(t, s) == 1 })
	// Closes the cycle; the commit, waiting longer, detects it and is
	// rolled back; its next attempt waits for a until finish.
	_, err := tx.Exec(ctx, "SELECT 1 FROM "+quoteIdent(s.schema)+".rows WHERE k = 'a' FOR UPDATE")
	if pgCode(err) == codeDeadlock {
		// The raw transaction is rolled back (at finish): the store's
		// commit goes on and finds j unchanged (a conflict).
		finish()
		if err := <-done; err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatalf("commit after the other side of a deadlock was rolled back: %v", err)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("commit after a deadlock: %v, want it sent again and applied", err)
	}
	if v, _, _ := s.Get(ctx, "main", []byte("a")); string(v) != "2" {
		t.Fatalf("a = %q, want 2", v)
	}
	return true
}
