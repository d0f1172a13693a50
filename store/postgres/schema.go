package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// migration is one step of weir's schema. Steps are applied in order, each
// in its own transaction together with its row in the migrations table, so
// a schema is always at exactly one version. A released step never changes:
// a change of the schema is a new step.
type migration struct {
	version int
	name    string
	sql     string // {s} stands for the quoted schema name
	// oldestReader is the oldest SchemaVersion of a weir build that still
	// runs correctly on the schema once this step is applied (0: this
	// step's own version — no older build). A step that only adds (a
	// table, a function older builds never call) names the version before
	// it, so that the operators of a rolling upgrade can run the new weir
	// store init first while the previous release keeps running
	// (docs/distributed.md, "Upgrade in place"). Init records it in the
	// schema's readers table, which builds before it never read.
	oldestReader int
}

// readers returns the oldest build version that runs on the schema at m.
func (m migration) readers() int { return cmp.Or(m.oldestReader, m.version) }

// migrations is weir's schema history. Version 1 is the whole layout
// documented in doc.go.
var migrations = []migration{{
	version: 1,
	name:    "tables, rows, leases, sequences, timestamps",
	sql: `
-- The logical tables (store.Table names); rows name theirs by id, a
-- shorter and cheaper index key than the name.
CREATE TABLE {s}.tables (
	id   int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name text NOT NULL UNIQUE
);

CREATE TABLE {s}.rows (
	t int NOT NULL,
	k bytea NOT NULL,
	v bytea NOT NULL,
	PRIMARY KEY (t, k)
);

CREATE TABLE {s}.leases (
	id         bigint PRIMARY KEY,
	timeout_ns bigint NOT NULL,
	expires_ns bigint NOT NULL,
	state      smallint NOT NULL,
	ended_ns   bigint
) WITH (fillfactor = 50); -- room for HOT updates: every ping writes a row version
CREATE SEQUENCE {s}.lease_ids AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE {s}.sequences (
	t      int NOT NULL,
	prefix bytea NOT NULL,
	next   bigint NOT NULL,
	PRIMARY KEY (t, prefix)
);

-- Every store.Timestamp ever issued; CACHE 1 (the default) keeps nextval
-- increasing across sessions.
CREATE SEQUENCE {s}.timestamps AS bigint MINVALUE 1 NO CYCLE;

-- now_ns is the time every lease decision is judged by: the database's
-- clock, or the caller's when it passes one (tests drive a manual clock).
CREATE FUNCTION {s}.now_ns(p_now bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
	SELECT coalesce(p_now, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000)
$$;

-- The advisory lock of the timestamp sequence: shared by every issuer,
-- exclusive while the sequence is moved up to the clock. The key is
-- 'weir' << 32 plus the sequence's oid: one per schema.
CREATE FUNCTION {s}.ts_lock_key() RETURNS bigint LANGUAGE sql STABLE AS $$
	SELECT 8603398601508388864 + '{s}.timestamps'::regclass::oid::bigint
$$;

-- hold_leases locks the lease rows of ids (distinct, sorted) FOR KEY SHARE
-- until the end of the transaction, if every one is active and unexpired;
-- otherwise it fails with WL001 and the transaction writes nothing.
-- AbortLease and expiry take FOR UPDATE, which waits for these locks.
--
-- The second look is not redundant. FOR KEY SHARE does not conflict with
-- an UPDATE that leaves the key alone, so PostgreSQL locks a row version
-- that a committed UPDATE has already replaced without re-checking the
-- WHERE clause on the new version (it does so for the other lock modes):
-- the first statement can lock a lease its snapshot still saw active
-- after AbortLease had ended it and passed its barrier. The second
-- statement, with a new snapshot taken once the locks are held, sees
-- every end committed before them; an end committed after them waits for
-- them in its barrier.
CREATE FUNCTION {s}.hold_leases(ids bigint[], p_now bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t bigint := {s}.now_ns(p_now);
	n int;
BEGIN
	SELECT count(*) INTO n FROM (
		SELECT id FROM {s}.leases
		WHERE id = ANY (ids) AND state = 1 AND expires_ns > t
		ORDER BY id FOR KEY SHARE) held;
	IF n = cardinality(ids) THEN
		SELECT count(*) INTO n FROM {s}.leases WHERE id = ANY (ids) AND state = 1 AND expires_ns > t;
	END IF;
	IF n <> cardinality(ids) THEN
		RAISE EXCEPTION 'weir: a prerequisite lease is not active' USING ERRCODE = 'WL001';
	END IF;
END $$;

-- check_rows serializes the commits that check the same keys (advisory
-- locks lk1[i], lk2[i], distinct and sorted), then evaluates the checks
-- against the latest committed rows: each statement of a VOLATILE function
-- takes a new snapshot, after the locks are held. A failed check raises
-- WC001 with the check's index as DETAIL.
CREATE FUNCTION {s}.check_rows(ts int[], keys bytea[], vals bytea[], absent boolean[], lk1 int[], lk2 int[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	cur bytea;
BEGIN
	FOR i IN 1 .. coalesce(cardinality(lk1), 0) LOOP
		PERFORM pg_advisory_xact_lock(lk1[i], lk2[i]);
	END LOOP;
	FOR i IN 1 .. coalesce(cardinality(ts), 0) LOOP
		SELECT v INTO cur FROM {s}.rows WHERE t = ts[i] AND k = keys[i];
		IF absent[i] AND FOUND THEN
			RAISE EXCEPTION 'weir: check % failed: the key exists', i - 1 USING ERRCODE = 'WC001', DETAIL = (i - 1)::text;
		ELSIF NOT absent[i] AND NOT FOUND THEN
			RAISE EXCEPTION 'weir: check % failed: the key is absent', i - 1 USING ERRCODE = 'WC001', DETAIL = (i - 1)::text;
		ELSIF NOT absent[i] AND cur <> vals[i] THEN
			RAISE EXCEPTION 'weir: check % failed: the key has another value', i - 1 USING ERRCODE = 'WC001', DETAIL = (i - 1)::text;
		END IF;
	END LOOP;
END $$;

-- append_rows appends vals to ordered sequences. Sequence j (1-based, the
-- arrays sorted by (table, prefix)) receives counts[j] rows; value r goes to
-- sequence seqidx[r] at position pos[r] (0-based) among that sequence's rows
-- of this call. Each sequence's tail row is locked until the end of the
-- transaction, so indexes are dense and in commit order; the timestamps
-- come from the sequence after the tails are locked, so they exceed every
-- earlier commit's. WT001: the timestamp sequence is behind the clock's
-- second (the caller bumps it and commits again).
CREATE FUNCTION {s}.append_rows(tids int[], prefixes bytea[], counts int[], seqidx int[], pos int[], vals bytea[], p_now bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	target bigint := ({s}.now_ns(p_now) / 1000000000) << 30;
	firsts bigint[] := '{}';
	nxt bigint;
	ts bigint[];
BEGIN
	FOR j IN 1 .. cardinality(tids) LOOP
		INSERT INTO {s}.sequences AS q (t, prefix, next) VALUES (tids[j], prefixes[j], counts[j])
		ON CONFLICT (t, prefix) DO UPDATE SET next = q.next + excluded.next
		RETURNING q.next INTO nxt;
		firsts := firsts || (nxt - counts[j]);
	END LOOP;
	PERFORM pg_advisory_xact_lock_shared({s}.ts_lock_key());
	ts := ARRAY(SELECT nextval('{s}.timestamps') FROM generate_series(1, cardinality(vals)));
	IF ts[1] < target THEN
		RAISE EXCEPTION 'weir: the timestamp sequence is behind the clock' USING ERRCODE = 'WT001';
	END IF;
	INSERT INTO {s}.rows (t, k, v)
	SELECT tids[u.si], prefixes[u.si] || int8send(firsts[u.si] + u.pos), int8send(ts[u.ord]) || u.val
	FROM unnest(seqidx, pos, vals) WITH ORDINALITY AS u(si, pos, val, ord)
	ON CONFLICT (t, k) DO UPDATE SET v = excluded.v;
END $$;

-- issue_timestamp returns the next timestamp, or NULL if the sequence is
-- behind the clock's second (the caller then calls bump_timestamp). The
-- transaction id it takes makes the commit flush the WAL record that
-- advanced the sequence, so a returned timestamp is never issued again
-- after a crash.
CREATE FUNCTION {s}.issue_timestamp(p_now bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	target bigint := ({s}.now_ns(p_now) / 1000000000) << 30;
	v bigint;
BEGIN
	PERFORM pg_advisory_xact_lock_shared({s}.ts_lock_key());
	v := nextval('{s}.timestamps');
	IF v < target THEN
		RETURN NULL;
	END IF;
	PERFORM txid_current();
	RETURN v;
END $$;

-- bump_timestamp moves the sequence up to the clock's second and returns
-- the next timestamp. The exclusive lock waits for every issuer, so no
-- nextval runs between the read of the sequence and setval: the sequence
-- never moves back.
CREATE FUNCTION {s}.bump_timestamp(p_now bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	target bigint := ({s}.now_ns(p_now) / 1000000000) << 30;
	nextv bigint;
BEGIN
	PERFORM pg_advisory_xact_lock({s}.ts_lock_key());
	SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO nextv FROM {s}.timestamps;
	IF nextv < target THEN
		PERFORM setval('{s}.timestamps', target, false);
	END IF;
	PERFORM txid_current();
	RETURN nextval('{s}.timestamps');
END $$;
`,
}, {
	version: 2,
	name:    "check_rows evaluates each check under its key's row lock",
	sql: `
-- Version 1's check_rows read the latest committed row under an advisory
-- lock that only checked commits took: a blind write of the key in flight
-- (row lock held, not committed) was not seen, and the checked commit's
-- write then waited for that lock and overwrote it — a lost update.
DROP FUNCTION {s}.check_rows(int[], bytea[], bytea[], boolean[], int[], int[]);

-- check_rows locks every checked key, then evaluates its checks on the
-- locked state, so that no commit writes the key between the check and
-- the end of this transaction. The checks arrive sorted by (t, k) — the
-- order every commit locks them in —; idx[i] is check i's index in the
-- Txn (the WC001 DETAIL).
--
-- An existing row is locked FOR UPDATE: the statement waits for every
-- writer of the row still in flight (an UPDATE or DELETE holds the row's
-- lock) and reads the row's latest version (READ COMMITTED re-reads a row
-- it waited for). An absent key has no row to lock: it is claimed by
-- inserting a placeholder row, which every other writer of the key (an
-- INSERT, whether ON CONFLICT or not, waits for the key's uncommitted
-- index entry) and every other claim waits for until this transaction
-- ends; if the insert meets a row instead (one committed meanwhile), the
-- row is locked and read as above. The placeholder never becomes visible:
-- when the Txn writes the key (keep[i]: a put, a delete, or a range
-- deletion covering it, all run after this function) that write replaces
-- it; otherwise it is deleted at once, which keeps the key claimed (an
-- insertion by a transaction in flight blocks other inserters even after
-- the same transaction deleted it).
CREATE FUNCTION {s}.check_rows(ts int[], keys bytea[], vals bytea[], absent boolean[], keep boolean[], idx int[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	cur bytea;
	here boolean;
BEGIN
	FOR i IN 1 .. coalesce(cardinality(ts), 0) LOOP
		IF i = 1 OR ts[i] <> ts[i - 1] OR keys[i] <> keys[i - 1] THEN
			LOOP
				SELECT v INTO cur FROM {s}.rows WHERE t = ts[i] AND k = keys[i] FOR UPDATE;
				here := FOUND;
				EXIT WHEN here;
				INSERT INTO {s}.rows (t, k, v) VALUES (ts[i], keys[i], '') ON CONFLICT (t, k) DO NOTHING;
				IF FOUND THEN
					IF NOT keep[i] THEN
						DELETE FROM {s}.rows WHERE t = ts[i] AND k = keys[i];
					END IF;
					EXIT;
				END IF;
			END LOOP;
		END IF;
		IF absent[i] AND here THEN
			RAISE EXCEPTION 'weir: check % failed: the key exists', idx[i] USING ERRCODE = 'WC001', DETAIL = idx[i]::text;
		ELSIF NOT absent[i] AND NOT here THEN
			RAISE EXCEPTION 'weir: check % failed: the key is absent', idx[i] USING ERRCODE = 'WC001', DETAIL = idx[i]::text;
		ELSIF NOT absent[i] AND cur <> vals[i] THEN
			RAISE EXCEPTION 'weir: check % failed: the key has another value', idx[i] USING ERRCODE = 'WC001', DETAIL = idx[i]::text;
		END IF;
	END LOOP;
END $$;
`,
}, {
	version: 3,
	name:    "append_rows inserts the appended rows without ON CONFLICT",
	sql: `
-- An appended row's key (prefix, index) is new: indexes are never reused
-- (the sequence's next only grows, and rolls back with its transaction),
-- and nothing but appends writes keys under a sequence's prefix (the
-- store contract's REQUIRES). Version 1 upserted them anyway, and the
-- speculative insertion of ON CONFLICT costs about twice a plain INSERT
-- (11.3 ms against 5.6 ms per 1,000 rows of 100 bytes, measured alone) —
-- while the sequences' rows are locked, so every commit appending to the
-- same sequence waited for it too. A key that exists after all (a
-- broken REQUIRES) now fails the commit (unique_violation, rolled back)
-- instead of overwriting the row.
CREATE OR REPLACE FUNCTION {s}.append_rows(tids int[], prefixes bytea[], counts int[], seqidx int[], pos int[], vals bytea[], p_now bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	target bigint := ({s}.now_ns(p_now) / 1000000000) << 30;
	firsts bigint[] := '{}';
	nxt bigint;
	ts bigint[];
BEGIN
	FOR j IN 1 .. cardinality(tids) LOOP
		INSERT INTO {s}.sequences AS q (t, prefix, next) VALUES (tids[j], prefixes[j], counts[j])
		ON CONFLICT (t, prefix) DO UPDATE SET next = q.next + excluded.next
		RETURNING q.next INTO nxt;
		firsts := firsts || (nxt - counts[j]);
	END LOOP;
	PERFORM pg_advisory_xact_lock_shared({s}.ts_lock_key());
	ts := ARRAY(SELECT nextval('{s}.timestamps') FROM generate_series(1, cardinality(vals)));
	IF ts[1] < target THEN
		RAISE EXCEPTION 'weir: the timestamp sequence is behind the clock' USING ERRCODE = 'WT001';
	END IF;
	INSERT INTO {s}.rows (t, k, v)
	SELECT tids[u.si], prefixes[u.si] || int8send(firsts[u.si] + u.pos), int8send(ts[u.ord]) || u.val
	FROM unnest(seqidx, pos, vals) WITH ORDINALITY AS u(si, pos, val, ord);
END $$;
`,
}}

// SchemaVersion is the schema version this build reads and writes: the
// last migration's (TestMigrations checks they agree).
const SchemaVersion = 3

// initLockKey serializes concurrent Init calls on one database (a
// session-level advisory lock, in the one-argument key space, just below
// the timestamp locks' 'weir' << 32 + oid).
const initLockKey = 8603398601508388863

// Init creates schema's tables and functions, or brings an older layout up
// to this build's version. It is idempotent and safe to run concurrently
// (an advisory lock serializes runs), and refuses a schema written by a
// newer weir. It returns the versions it applied (none when the schema was
// current).
func Init(ctx context.Context, url, schema string) ([]int, error) {
	if err := validSchema(schema); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: init: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(initLockKey)); err != nil {
		return nil, fmt.Errorf("postgres store: init: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(initLockKey))

	q := quoteIdent(schema)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q); err != nil {
		return nil, fmt.Errorf("postgres store: init: create schema %s: %w", schema, err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.migrations (
	version    int PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return nil, fmt.Errorf("postgres store: init: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.readers (
	version       int PRIMARY KEY,
	oldest_reader int NOT NULL
)`); err != nil {
		return nil, fmt.Errorf("postgres store: init: %w", err)
	}
	have, err := appliedVersion(ctx, conn, schema)
	if err != nil {
		return nil, err
	}
	if have > SchemaVersion {
		return nil, fmt.Errorf("postgres store: init: schema %s is at version %d, newer than this weir's %d: upgrade weir", schema, have, SchemaVersion)
	}
	// What each step says of older builds (also for steps applied before
	// the readers table existed; a released step's entry never changes).
	for _, m := range migrations {
		if _, err := conn.Exec(ctx, "INSERT INTO "+q+".readers (version, oldest_reader) VALUES ($1, $2) ON CONFLICT DO NOTHING", m.version, m.readers()); err != nil {
			return nil, fmt.Errorf("postgres store: init: %w", err)
		}
	}
	var applied []int
	for _, m := range migrations {
		if m.version <= have {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, expand(m.sql, schema)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+q+".migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("postgres store: init: migration %d (%s): %w", m.version, m.name, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

// querier is what appliedVersion needs of a connection or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// appliedVersion returns the schema's version: the highest applied
// migration, 0 for an empty migrations table. An absent schema or table
// is errNotInitialized.
func appliedVersion(ctx context.Context, q querier, schema string) (int, error) {
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+quoteIdent(schema)+".migrations").Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined_table, invalid_schema_name
		return 0, errNotInitialized
	}
	if err != nil {
		return 0, fmt.Errorf("postgres store: read schema version: %w", err)
	}
	return v, nil
}

var errNotInitialized = errors.New("not initialized")

// checkVersion fails unless schema is at exactly this build's version,
// with an error saying what to run.
func checkVersion(ctx context.Context, q querier, schema string) error {
	v, err := appliedVersion(ctx, q, schema)
	switch {
	case errors.Is(err, errNotInitialized) || err == nil && v == 0:
		return fmt.Errorf("postgres store: schema %s is not initialized: run weir store init --store <url> first", schema)
	case err != nil:
		return err
	case v < SchemaVersion:
		return fmt.Errorf("postgres store: schema %s is at version %d, this weir needs %d: run weir store init --store <url> to migrate it", schema, v, SchemaVersion)
	case v > SchemaVersion:
		oldest, err := oldestReader(ctx, q, schema, v)
		if err != nil {
			return err
		}
		if oldest > 0 && oldest <= SchemaVersion {
			return nil // a newer schema that still serves this build
		}
		return fmt.Errorf("postgres store: schema %s is at version %d, newer than this weir's %d, and does not serve it (%s): upgrade weir", schema, v, SchemaVersion, readersText(oldest))
	}
	return nil
}

// oldestReader returns the oldest build version the schema at version v
// serves, from its readers table (0: not recorded — a schema from before
// the table, or a step that did not say).
func oldestReader(ctx context.Context, q querier, schema string, v int) (int, error) {
	var oldest int
	err := q.QueryRow(ctx, "SELECT oldest_reader FROM "+quoteIdent(schema)+".readers WHERE version = $1", v).Scan(&oldest)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("postgres store: read schema %s's readers: %w", schema, err)
	}
	return oldest, nil
}

func readersText(oldest int) string {
	if oldest == 0 {
		return "it names no older build it serves"
	}
	return fmt.Sprintf("it serves builds of schema version %d and later", oldest)
}

// expand replaces {s} in sql by the quoted schema name.
func expand(sql, schema string) string { return strings.ReplaceAll(sql, "{s}", quoteIdent(schema)) }

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// validSchema accepts the schema names weir creates: [a-z_][a-z0-9_]*, at
// most 63 bytes (PostgreSQL's identifier limit). The restriction keeps the
// name safe inside the SQL text of the functions too.
func validSchema(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("postgres store: schema name %q: want 1 to 63 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("postgres store: schema name %q: want [a-z_][a-z0-9_]*", name)
		}
	}
	return nil
}
