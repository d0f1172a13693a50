package postgres

// statements holds the SQL text of every statement the store sends, with
// the schema filled in. The driver prepares each text once per connection
// and reuses it (pgx's statement cache), so the texts are fixed strings:
// no statement is built per call except by choosing among these.
type statements struct {
	now string

	lookupTable, ensureTable string

	get                                    string
	scanFwd, scanRev, scanFwdHi, scanRevHi string

	holdLeases, checkRows, appendRows string
	deleteRange, deleteRangeToEnd     string
	deleteKeys, upsert                string

	createLease, pingLease, observeLease string
	abortLease, expireLease, barrier     string
	gcLeases, endStalled                 string

	issueTimestamp, bumpTimestamp string
}

func newStatements(schema string) statements {
	x := func(sql string) string { return expand(sql, schema) }
	const scan = `SELECT k, v FROM {s}.rows WHERE t = $1 AND k >= $2 `
	return statements{
		now: x(`SELECT {s}.now_ns($1)`),

		lookupTable: x(`SELECT id FROM {s}.tables WHERE name = $1`),
		// DO UPDATE (not NOTHING) so that RETURNING also answers for a
		// name another process inserted first.
		ensureTable: x(`INSERT INTO {s}.tables (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`),

		get:       x(`SELECT v FROM {s}.rows WHERE t = $1 AND k = $2`),
		scanFwd:   x(scan + `ORDER BY k LIMIT $3`),
		scanRev:   x(scan + `ORDER BY k DESC LIMIT $3`),
		scanFwdHi: x(scan + `AND k < $3 ORDER BY k LIMIT $4`),
		scanRevHi: x(scan + `AND k < $3 ORDER BY k DESC LIMIT $4`),

		holdLeases: x(`SELECT {s}.hold_leases($1, $2)`),
		checkRows:  x(`SELECT {s}.check_rows($1, $2, $3, $4, $5, $6)`),
		appendRows: x(`SELECT {s}.append_rows($1, $2, $3, $4, $5, $6, $7)`),

		deleteRange:      x(`DELETE FROM {s}.rows WHERE t = $1 AND k >= $2 AND k < $3`),
		deleteRangeToEnd: x(`DELETE FROM {s}.rows WHERE t = $1 AND k >= $2`),
		// Keys arrive sorted, so concurrent commits lock shared rows in
		// the same order.
		deleteKeys: x(`DELETE FROM {s}.rows WHERE t = $1 AND k = ANY ($2::bytea[])`),
		upsert: x(`INSERT INTO {s}.rows (t, k, v) SELECT $1, u.k, u.v FROM unnest($2::bytea[], $3::bytea[]) AS u(k, v)
ON CONFLICT (t, k) DO UPDATE SET v = excluded.v`),

		createLease: x(`INSERT INTO {s}.leases (id, timeout_ns, expires_ns, state)
SELECT nextval('{s}.lease_ids'), $1, n.t + $1, 1 FROM (SELECT {s}.now_ns($2) AS t) n
RETURNING id, expires_ns - timeout_ns`),
		// A ping never shortens a lease (a clock that went back) and never
		// revives one: only an active, unexpired lease is extended.
		pingLease: x(`UPDATE {s}.leases l SET expires_ns = greatest(l.expires_ns, n.t + l.timeout_ns)
FROM (SELECT {s}.now_ns($2) AS t) n
WHERE l.id = $1 AND l.state = 1 AND l.expires_ns > n.t
RETURNING n.t`),
		observeLease: x(`SELECT l.state, l.expires_ns <= n.t, n.t FROM {s}.leases l, (SELECT {s}.now_ns($2) AS t) n WHERE l.id = $1`),
		abortLease: x(`UPDATE {s}.leases l SET state = CASE WHEN l.expires_ns <= n.t THEN 3 ELSE 2 END, ended_ns = n.t
FROM (SELECT {s}.now_ns($2) AS t) n
WHERE l.id = $1 AND l.state = 1`),
		expireLease: x(`UPDATE {s}.leases l SET state = 3, ended_ns = n.t
FROM (SELECT {s}.now_ns($2) AS t) n
WHERE l.id = $1 AND l.state = 1 AND l.expires_ns <= n.t`),
		// FOR UPDATE conflicts with the FOR KEY SHARE of every commit that
		// saw the lease active: the statement returns once they all ended.
		barrier: x(`SELECT 1 FROM {s}.leases WHERE id = $1 FOR UPDATE`),
		// The sessions blocking the barrier's session ($1) that wait for
		// their client in the middle of a pipeline (state active, waiting
		// for ClientRead: the rest of a commit that never came) since
		// before $2 seconds ago.
		endStalled: `SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid)) FROM pg_stat_activity a
WHERE a.pid = ANY (pg_blocking_pids($1)) AND a.wait_event = 'ClientRead' AND a.state = 'active'
AND a.query_start < now() - make_interval(secs => $2)`,
		gcLeases: x(`DELETE FROM {s}.leases l USING (SELECT {s}.now_ns($2) AS t) n
WHERE l.state <> 1 AND l.ended_ns < n.t - $1 OR l.state = 1 AND l.expires_ns < n.t - $1`),

		issueTimestamp: x(`SELECT {s}.issue_timestamp($1)`),
		bumpTimestamp:  x(`SELECT {s}.bump_timestamp($1)`),
	}
}
