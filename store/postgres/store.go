package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// DefaultSchema is the schema weir's tables live in unless the URL's
// weir_schema parameter or Options.Schema names another.
const DefaultSchema = "weir"

// SchemaParam is the store URL's query parameter naming the schema
// (postgres://host/db?weir_schema=name). Open removes it before the URL
// reaches the driver.
const SchemaParam = "weir_schema"

// Options configure Open. The zero value is the production setting.
type Options struct {
	// Schema holds weir's tables (default DefaultSchema, or the URL's
	// weir_schema parameter; naming two different schemas is an error).
	// One schema is one store: several pipelines may share a database in
	// different schemas.
	Schema string

	// Clock, if set, replaces the database's clock: its time is sent with
	// every statement that judges lease expiry or issues timestamps. For
	// tests that drive time by hand (clock.Manual); production leaves it
	// nil, so that one clock — the database's — decides expiry for every
	// process of a pipeline.
	Clock clock.Clock

	// MaxConns is the connection pool's size (default: the URL's
	// pool_max_conns, else 32). Concurrent commits beyond it wait for a
	// connection.
	MaxConns int32

	// EndedLeaseRetention is how long an ended lease's row is kept after
	// it ended (default 24h); afterwards LeaseState reports LeaseUnknown,
	// which fails commits the same way. Expired leases nobody observed are
	// removed the same time after their expiry.
	EndedLeaseRetention time.Duration

	// StalledCommitTimeout is how long a lease's barrier waits for a
	// commit whose client stopped sending in the middle of its pipeline
	// (a stopped or partitioned process: its server session holds the
	// lease's row lock, waiting for the rest) before it terminates that
	// session, which rolls the commit back (default 10s). Commits the
	// server is executing are never terminated.
	StalledCommitTimeout time.Duration
}

// Store is a store.Store on PostgreSQL. See the package comment.
type Store struct {
	pool      *pgxpool.Pool
	schema    string
	clock     clock.Clock // nil: the database's clock
	sql       statements
	tables    tableIDs
	retention time.Duration
	stalled   time.Duration
	closed    atomic.Bool

	// dbOffset estimates the database clock minus the local clock, in
	// nanoseconds, for Now (see observeDBTime).
	dbOffset atomic.Int64
	// lastLeaseGC is the store time (unix ns) of the last ended-lease sweep.
	lastLeaseGC atomic.Int64
	// stallChecks counts the barrier's looks for stalled sessions (tests).
	stallChecks atomic.Int64
}

var _ store.Store = (*Store)(nil)

// ParseURL splits a store URL into the driver's connection string and the
// schema named by its weir_schema parameter ("" if none).
func ParseURL(raw string) (conn, schema string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("postgres store: URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", "", fmt.Errorf("postgres store: URL scheme %q: want postgres:// or postgresql://", u.Scheme)
	}
	q := u.Query()
	schema = q.Get(SchemaParam)
	q.Del(SchemaParam)
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// Open connects to the store at rawURL (postgres://user:pass@host:port/db?...,
// the driver's parameters plus weir_schema). The schema must have been
// created by Init (weir store init) at this build's version. Open refuses a
// server whose fsync or synchronous_commit is off: Commit promises
// durability on return.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	connURL, urlSchema, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	schema, err := pickSchema(urlSchema, opts.Schema)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if _, set := cfg.ConnConfig.RuntimeParams["pool_max_conns"]; !set && !hasParam(connURL, "pool_max_conns") {
		cfg.MaxConns = 32
	}
	for k, v := range sessionParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "weir"
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		registerFastArrays(c.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	s := &Store{
		pool:      pool,
		schema:    schema,
		clock:     opts.Clock,
		sql:       newStatements(schema),
		retention: opts.EndedLeaseRetention,
	}
	if s.retention <= 0 {
		s.retention = 24 * time.Hour
	}
	if s.stalled = opts.StalledCommitTimeout; s.stalled <= 0 {
		s.stalled = 10 * time.Second
	}
	if err := s.checkServer(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// sessionParams are the settings of every session of the store.
//
//   - default_transaction_isolation: commits rely on READ COMMITTED's rules
//     (a fresh snapshot per statement, EvalPlanQual on locked rows); a
//     server whose default is stricter would turn lock waits into
//     serialization failures.
//   - enable_sort=off: every statement the store sends is served in order
//     by a primary key, and a sort is never the better plan; but a planner
//     without statistics (a young table) estimates a range at a few rows
//     and sorts it, reading all of it to return the first rows of a
//     limited scan (measured: 160 ms instead of 0.3 ms for the first 1000
//     of 200,000 rows). TestScanWalksTheIndex pins the plans.
var sessionParams = map[string]string{
	"default_transaction_isolation": "read committed",
	"enable_sort":                   "off",
}

func hasParam(connURL, name string) bool {
	u, err := url.Parse(connURL)
	return err == nil && u.Query().Has(name)
}

func pickSchema(fromURL, fromOpts string) (string, error) {
	schema := fromOpts
	switch {
	case fromURL != "" && fromOpts != "" && fromURL != fromOpts:
		return "", fmt.Errorf("postgres store: the URL names schema %q and the options %q", fromURL, fromOpts)
	case fromURL != "":
		schema = fromURL
	case schema == "":
		schema = DefaultSchema
	}
	return schema, validSchema(schema)
}

// checkServer verifies the schema version and the durability settings,
// and takes the first sample of the database's clock.
func (s *Store) checkServer(ctx context.Context) error {
	if err := checkVersion(ctx, s.pool, s.schema); err != nil {
		return err
	}
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
			return fmt.Errorf("postgres store: read %s: %w", setting, err)
		}
		if v == "off" {
			return fmt.Errorf("postgres store: the server runs with %s=off: a commit would not be durable when it returns; turn it on", setting)
		}
	}
	before := time.Now()
	var dbNow int64
	if err := s.pool.QueryRow(ctx, s.sql.now, nil).Scan(&dbNow); err != nil {
		return fmt.Errorf("postgres store: read the database's clock: %w", err)
	}
	s.observeDBTime(before, dbNow)
	return nil
}

// Schema returns the schema the store lives in.
func (s *Store) Schema() string { return s.schema }

// nowParam is the time sent with a statement that judges time: nil (the
// statement reads the database's clock) unless Options.Clock is set.
func (s *Store) nowParam() *int64 {
	if s.clock == nil {
		return nil
	}
	ns := s.clock.Now().UnixNano()
	return &ns
}

// observeDBTime refines the estimate of the database's clock from a
// reading dbNow (unix ns) taken by a statement sent at local time sent and
// answered now: the reading is placed at the round trip's midpoint.
func (s *Store) observeDBTime(sent time.Time, dbNow int64) {
	if s.clock != nil {
		return
	}
	rtt := time.Since(sent)
	mid := sent.Add(rtt / 2)
	s.dbOffset.Store(dbNow - mid.UnixNano())
}

// Now is the store's clock: Options.Clock if set, else the database's
// clock, estimated locally from the offset measured on the last lease call
// or at Open (off by at most half a round trip plus the drift since). It
// never decides expiry itself: the database does, in the statements.
func (s *Store) Now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now().Add(time.Duration(s.dbOffset.Load()))
}

// acquire returns a pooled connection; a failure to get one applied
// nothing, so it is retriable (or ErrClosed after Close).
func (s *Store) acquire(ctx context.Context, op string) (*pgxpool.Conn, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		if s.closed.Load() {
			return nil, store.ErrClosed
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, store.Retriable(fmt.Errorf("postgres store: %s: connect: %w", op, err))
	}
	return c, nil
}

// Get returns a copy of the committed value of key in table.
func (s *Store) Get(ctx context.Context, table store.Table, key []byte) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !table.Valid() {
		return nil, false, fmt.Errorf("postgres store: get: invalid table name %q", table)
	}
	c, err := s.acquire(ctx, "get")
	if err != nil {
		return nil, false, err
	}
	defer c.Release()
	tid, ok, err := s.tableID(ctx, c, table, false)
	if err != nil || !ok {
		return nil, false, err
	}
	var v []byte
	err = c.QueryRow(ctx, s.sql.get, tid, nonNil(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readErr(ctx, "get "+string(table), err)
	}
	return nonNil(v), true, nil
}

// Scan calls fn for the committed rows of r in key order (reverse order if
// r.Reverse). It runs one statement, so it reads one consistent snapshot;
// rows stream from the server as fn consumes them. When fn stops early the
// rest of the result is still read off the connection: scans that stop
// early should set a Limit. An inverted range is empty; a negative Limit is
// an error. fn may call the Store's other methods (they use other pooled
// connections), except Close.
func (s *Store) Scan(ctx context.Context, r store.Range, fn func(key, value []byte) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !r.Table.Valid() {
		return fmt.Errorf("postgres store: scan: invalid table name %q", r.Table)
	}
	if r.Limit < 0 {
		return fmt.Errorf("postgres store: scan %s: negative limit %d", r.Table, r.Limit)
	}
	if r.Hi != nil && string(r.Lo) >= string(r.Hi) {
		return nil
	}
	c, err := s.acquire(ctx, "scan")
	if err != nil {
		return err
	}
	defer c.Release()
	tid, ok, err := s.tableID(ctx, c, r.Table, false)
	if err != nil || !ok {
		return err
	}
	limit := int64(r.Limit)
	if limit == 0 {
		limit = 1<<63 - 1
	}
	q, args := s.sql.scanFwd, []any{tid, nonNil(r.Lo), limit}
	switch {
	case r.Hi != nil && r.Reverse:
		q, args = s.sql.scanRevHi, []any{tid, nonNil(r.Lo), r.Hi, limit}
	case r.Hi != nil:
		q, args = s.sql.scanFwdHi, []any{tid, nonNil(r.Lo), r.Hi, limit}
	case r.Reverse:
		q = s.sql.scanRev
	}
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return s.readErr(ctx, "scan "+string(r.Table), err)
	}
	defer rows.Close()
	var k, v pgtype.DriverBytes
	for rows.Next() {
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("postgres store: scan %s: %w", r.Table, err)
		}
		if !fn(k, v) {
			rows.Close()
			break
		}
	}
	if err := rows.Err(); err != nil {
		return s.readErr(ctx, "scan "+string(r.Table), err)
	}
	return nil
}

// Close closes the pool, waiting for the calls in flight. Later calls fail
// with store.ErrClosed; so does a second Close.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	s.pool.Close()
	return nil
}

// nonNil returns b, or an empty slice for nil: the driver sends a nil
// slice as NULL, and keys and values are never NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
