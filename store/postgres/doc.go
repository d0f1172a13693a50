// Package postgres is weir's networked store backend: a store.Store on
// PostgreSQL (15 tested) through pgx v5 and its connection pool, for
// pipelines whose processes run on several machines. It passes the whole
// conformance suite (store/storetest), barrier and zombie races included,
// and runs the engine's counter pipeline exactly once with commits cut
// mid-flight (engine_test.go).
//
// # Use
//
// Create the schema once, then open the store from any process:
//
//	weir store init --store 'postgres://weir@db.example:5432/weir?sslmode=verify-full&weir_schema=clicks'
//
//	s, err := postgres.Open(ctx, url, postgres.Options{})
//
// The URL is pgx's (user, password, host, port, database, sslmode,
// pool_max_conns, …) plus weir_schema=NAME (default "weir"): one schema is
// one store, so pipelines may share a database. Init (weir store init)
// creates the schema or migrates it to this build's version, idempotently
// and serialized against concurrent runs; Open refuses a missing, older or
// newer schema with a message saying what to run, and refuses a session
// whose fsync or synchronous_commit is off (a commit must be durable when
// it returns). store/open picks this backend for a postgres:// address.
//
// # Schema (version 3; schema.go)
//
//	tables(id int, name text UNIQUE)                      the logical tables
//	rows(t int, k bytea, v bytea, PRIMARY KEY (t, k))     every row of every table
//	leases(id, timeout_ns, expires_ns, state, ended_ns)   + sequence lease_ids
//	sequences(t, prefix, next)                            the tails of Append
//	sequence timestamps                                   every store.Timestamp
//	migrations(version, name, applied_at)
//	functions now_ns, hold_leases, check_rows, append_rows,
//	          issue_timestamp, bump_timestamp, ts_lock_key
//
// Every logical table is a key range of one rows table, named by a small
// id (tables.go: assigned at a table's first write, cached by each
// process, never changed). Three layouts were measured by the server's own
// time (BenchmarkLayout: EXPLAIN ANALYZE, medians of 100 interleaved
// rounds, two runs on a loaded machine): the upsert of 1000 rows took
// 5.97–10.58 ms with the table's name in the key, 4.99–8.77 ms with an id
// in the key, 4.46–7.81 ms with a table per logical table; an ordered scan
// of 1000 rows 0.34–0.48, 0.33–0.43 and 0.26–0.34 ms. The id gets about two
// thirds of what a table per name saves on writes while keeping one table:
// the store contract lets a commit name any table, and a table per name
// would need DDL while the pipeline runs (a CREATE TABLE racing itself
// fails in PostgreSQL, identifiers are shorter than table names may be),
// statements per table, and dynamic SQL in the functions. The primary key
// serves every read and write in key order: bytea compares bytewise,
// shorter first, as store.Scan promises.
//
// # Commits (commit.go)
//
// A Txn is one batch of statements sent in one round trip and executed as
// one implicit transaction (the extended protocol's pipeline up to its
// Sync): hold_leases, check_rows, range deletions, point deletions and
// upserts (one statement per table, unnest of key and value arrays, keys
// sorted), append_rows. The driver prepares each statement once per
// connection. A server ERROR rolls everything back; weir's functions raise
// their own SQLSTATEs for a lost lease (WL001), a failed check (WC001) and
// a timestamp sequence behind the clock (WT001, answered by moving the
// sequence up and committing again).
//
// A check is evaluated under a lock of its key that every writer of the
// key meets, checked or not (store.Check): check_rows locks an existing
// row FOR UPDATE — waiting for a write of it in flight, then reading its
// latest version — and claims an absent key by inserting a placeholder
// row, which other inserts of the key wait for; the Txn's own write of the
// key replaces the placeholder, or it is deleted at once (schema version
// 2). Checked keys are locked in (table, key) order. Version 1 read the
// latest committed row under an advisory lock only checked commits took,
// so a checked write overwrote a blind write in flight (issue 23 item 2;
// storetest's CheckRaces). A commit that writes a key another checks, while
// checking a key the other writes, can close a lock cycle; the server
// breaks it (deadlock_timeout, 1 s by default) and Commit sends the rolled-
// back one again.
//
// # Leases (leases.go)
//
// Leases are rows; a commit locks its leases' rows FOR KEY SHARE until it
// ends, if they are active and unexpired by the store's clock (the
// database's clock_timestamp(), or Options.Clock in tests), then looks
// again with a fresh snapshot (FOR KEY SHARE does not re-check a row that a
// committed non-key UPDATE replaced — the zombie race found that). Ending a
// lease (AbortLease, or expiry observed by LeaseState, PingLease or a
// commit) is an UPDATE that commits first, so no new commit can lock the
// row, then a SELECT … FOR UPDATE that waits for every commit still
// holding it: the barrier. Pings are UPDATEs that never wait for commits.
// A commit whose client stopped in the middle of its pipeline (a stopped
// or partitioned process) would hold the lock forever; after
// StalledCommitTimeout the barrier terminates such sessions, which never
// reached their Sync and so roll back. Ended leases are deleted
// EndedLeaseRetention after they ended.
//
// # Timestamps (timestamp.go)
//
// Every store.Timestamp comes from one sequence whose values are the
// timestamps themselves: global, strictly increasing across processes and
// restarts, never below the clock's second (an exclusive advisory lock
// moves it up; every draw shares it, so it never moves back), durable
// before returned (the draw's commit flushes the sequence's log record).
//
// # Errors (errors.go)
//
// Lease lost: *store.LeaseLostError, after the barrier. Failed check:
// store.ErrConflict. A server ERROR: retriable if transient (serialization
// failure, deadlock, resources), else fatal (nothing was applied either
// way). A lost connection, a cancelled context, a FATAL message
// (pg_terminate_backend, shutdown), class 08 or 57, or 40003 after the
// batch was sent: *store.AmbiguousError; the engine resolves it through
// its guarded partition_transactions row. A failure before anything was
// sent (no connection): retriable. Reads and lease calls: network and
// transient errors retriable.
//
// # Sessions
//
// Every connection runs READ COMMITTED (the lease and check logic relies on
// a fresh snapshot per statement and on EvalPlanQual) with enable_sort=off
// (a planner without statistics sorted whole ranges for limited scans:
// 160 ms instead of 0.3 ms; TestScanWalksTheIndex pins the plans).
//
// # Limits
//
//   - Now is the database's clock estimated locally (offset measured on
//     each lease call), within half a round trip; expiry itself is always
//     judged by the database in the statements.
//   - Scan streams one statement's result (one snapshot) over one pooled
//     connection; a callback that calls the store uses another one, and a
//     scan stopped early without a Limit still reads its result off the
//     wire. Each Get is a round trip: read in ranges where possible.
//   - A DeleteRange does not lock the gaps of its range: a Put committed
//     concurrently by another transaction into the range may survive it.
//     The engine writes a partition's keys only under its lease, so no two
//     of its transactions race that way.
//   - A Put is an upsert (INSERT … ON CONFLICT DO UPDATE), about twice the
//     server time of a plain INSERT; the contract does not say which keys
//     are new. An appended row is a plain INSERT (version 3): its key is
//     new by the contract (indexes are never reused, only appends write
//     under a sequence's prefix), and it is inserted while the sequence's
//     row is locked, so every appender to the sequence waits for it; a
//     taken key fails the commit (unique_violation) instead of being
//     overwritten.
//
// # On CockroachDB and YugabyteDB (untested here; what would differ)
//
// The statements are plain SQL both accept (unnest, ON CONFLICT, FOR KEY
// SHARE / FOR UPDATE, sequences, clock_timestamp), except:
//
//   - PL/pgSQL: the functions use loops, PERFORM and RAISE with custom
//     SQLSTATEs. YugabyteDB runs PostgreSQL's PL/pgSQL; CockroachDB (23.2+)
//     supports a subset: port them or send their statements from Go.
//   - Advisory locks (checks, the timestamp sequence): YugabyteDB has them
//     (2.25+); CockroachDB does not. There, run commits SERIALIZABLE (its
//     default): a check and a concurrent write of the key cannot both
//     commit, so checks need no lock; draw timestamps from
//     cluster_logical_timestamp() (an HLC, strictly increasing) mapped to
//     the second/counter layout instead of a sequence.
//   - The barrier: it relies on PostgreSQL's row locks under READ
//     COMMITTED (KEY SHARE vs UPDATE, lockers carried to new row
//     versions). YugabyteDB needs yb_enable_read_committed_isolation=true
//     (else READ COMMITTED is snapshot isolation and hold_leases' second
//     look sees nothing new). On CockroachDB under SERIALIZABLE a commit
//     that read the lease active and the abort that writes it are ordered
//     by the database: the lease read needs no lock, and AbortLease's
//     commit is the barrier.
//   - Sequences: YugabyteDB caches sequence values per server by default
//     (ysql_sequence_cache_minval): set it to 1, or timestamps are not
//     increasing across processes. CockroachDB's nextval is a write (a
//     round trip to the range holding it); setval and reading last_value
//     differ.
//   - int8send (big-endian encoding in append_rows), txid_current and
//     COLLATE "C": PostgreSQL's and YugabyteDB's; on CockroachDB encode in
//     Go or with to_hex, use crdb_internal functions, and a bytea table name.
//   - Session settings: enable_sort is PostgreSQL's planner switch
//     (YugabyteDB accepts it; CockroachDB refuses unknown settings at
//     connection, so do not send it there).
//   - Ambiguity: CockroachDB reports an ambiguous commit as 40003
//     (statement completion unknown), classified ambiguous here already.
//   - Clocks: expiry is judged by the clock of the node that runs the
//     statement; CockroachDB bounds node clock offsets (500 ms by default),
//     so lease timeouts must be well above it.
//
// # Figures
//
// See docs/distributed.md ("Store"): commits/s and rows/s side by side
// with the embedded store, and the command that measured them.
package postgres
