package clickhouse

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir/spec"
)

// Defaults of the parameters. The package comment documents each one.
const (
	DefaultDatabase             = "default"
	DefaultUser                 = "default"
	DefaultMaxBatchRows         = 10000
	DefaultMaxBatchBytes        = 16 << 20
	DefaultMaxInsertAttempts    = 10
	DefaultWriteTimeout         = 60 * time.Second
	DefaultRetryInitialDelay    = 100 * time.Millisecond
	DefaultRetryMaximumDelay    = 10 * time.Second
	DefaultReplayHorizon        = time.Hour
	DefaultFormat               = FormatTabSeparated
	defaultHTTPPort             = "8123"
	maxBatchRowsLimit           = 1 << 20 // ClickHouse's max_insert_block_size: one batch stays one block
	maxIdleConnectionsPerTarget = 4
)

// Row formats of the INSERT body.
const (
	FormatTabSeparated = "tab_separated"
	FormatJSONEachRow  = "json_each_row"
)

// EnvPassword is read for the password when neither password nor
// password_env is set.
const EnvPassword = "WEIR_CLICKHOUSE_PASSWORD"

// Params are the parameters every class takes. Which of host, hosts and
// shard_hosts is allowed depends on the class (see the package comment).
// The field comments are the reference of each key: internal/specdoc
// turns them into docs/spec.md.
type Params struct {
	// Host is the HTTP endpoint: "host:port" (port 8123 if left out) or
	// "http(s)://host:port". Give host or hosts; not for the sharded class.
	Host string `yson:"host"`
	// Hosts are replicas of one table, in failover order, each written as
	// host is. Not for the sharded class.
	Hosts []string `yson:"hosts"`
	// ShardHosts maps a shard name to its endpoints (replicas in failover
	// order): ShardedClickHouseBatchingSink only, required there. Shard
	// names become token suffixes.
	ShardHosts map[string][]string `yson:"shard_hosts"`
	// ShardingKeyColumns route rows to shards (sharded class only); empty:
	// the message id.
	ShardingKeyColumns []string `yson:"sharding_key_columns"`

	// Database holds the table (default "default").
	Database string `yson:"database"`
	// Table is the target table (required): a Replicated*MergeTree, a
	// Shared*MergeTree, or a MergeTree with
	// non_replicated_deduplication_window > 0 for exactly-once.
	Table string `yson:"table"`
	// User is the ClickHouse user (default "default").
	User string `yson:"user"`
	// Password is the user's password in the spec; prefer password_env.
	// Never logged. Typed any so that a mistyped value is reported
	// without echoing it.
	Password any `yson:"password"`
	// PasswordEnv names an environment variable holding the password;
	// with neither password nor password_env, WEIR_CLICKHOUSE_PASSWORD is
	// read.
	PasswordEnv string `yson:"password_env"`

	// Columns are the INSERT's columns; empty: every plain column of the
	// table (without DEFAULT, MATERIALIZED or ALIAS expression).
	Columns []string `yson:"columns"`
	// MessageIDColumn names a String column the sink fills with the
	// message id; empty: none.
	MessageIDColumn string `yson:"message_id_column"`
	// Format is the INSERT body's row format: tab_separated (default) or
	// json_each_row.
	Format string `yson:"format"`

	// MaxBatchRows and MaxBatchBytes (an estimate) bound a batch of the
	// exactly-once and at-least-once sinks.
	MaxBatchRows  int `yson:"max_batch_rows"`
	MaxBatchBytes int `yson:"max_batch_bytes"`

	// DeduplicationTokenPrefix is prepended to every deduplication token;
	// set it when several pipelines or sinks write one table, since
	// message ids are unique only within a pipeline.
	DeduplicationTokenPrefix string `yson:"deduplication_token_prefix"`
	// ReplayHorizon is how late a replay may come, compared with the
	// table's deduplication window in seconds for a warning. Dynamic.
	ReplayHorizon spec.Duration `yson:"replay_horizon"`
	// ReplayHorizonInserts is how many INSERTs later a replay may come,
	// compared with block-count deduplication windows (0: not compared).
	ReplayHorizonInserts int64 `yson:"replay_horizon_inserts"`

	// MaxInsertAttempts bounds the attempts of an INSERT failing with
	// unclassified errors (transient ones are retried without limit,
	// permanent ones not at all).
	MaxInsertAttempts int `yson:"max_insert_attempts"`
	// WriteTimeout bounds one INSERT attempt. Dynamic.
	WriteTimeout spec.Duration `yson:"write_timeout"`
	// RetryInitialDelay and RetryMaximumDelay bound the wait between
	// attempts: initial × 2^(n-1), at most the maximum, ±20% jitter.
	RetryInitialDelay spec.Duration `yson:"retry_initial_delay"`
	RetryMaximumDelay spec.Duration `yson:"retry_maximum_delay"`

	// password is the resolved secret (never printed).
	password string
}

// SetDefaults implements spec.Defaulter.
func (p *Params) SetDefaults() {
	p.Database = DefaultDatabase
	p.User = DefaultUser
	p.Format = DefaultFormat
	p.MaxBatchRows = DefaultMaxBatchRows
	p.MaxBatchBytes = DefaultMaxBatchBytes
	p.ReplayHorizon = spec.Duration(DefaultReplayHorizon)
	p.MaxInsertAttempts = DefaultMaxInsertAttempts
	p.WriteTimeout = spec.Duration(DefaultWriteTimeout)
	p.RetryInitialDelay = spec.Duration(DefaultRetryInitialDelay)
	p.RetryMaximumDelay = spec.Duration(DefaultRetryMaximumDelay)
}

// String describes p without the password.
func (p Params) String() string {
	pw := "none"
	if p.Password != nil || p.PasswordEnv != "" {
		pw = "<redacted>"
	}
	return fmt.Sprintf("{host=%q hosts=%v shard_hosts=%v database=%q table=%q user=%q password=%s format=%s max_batch_rows=%d max_batch_bytes=%d write_timeout=%v}",
		p.Host, p.Hosts, p.ShardHosts, p.Database, p.Table, p.User, pw, p.Format, p.MaxBatchRows, p.MaxBatchBytes, p.WriteTimeout)
}

// GoString is String, so that %#v does not print the password either.
func (p Params) GoString() string { return "clickhouse.Params" + p.String() }

// targetKind says which host parameter a class takes.
type targetKind int

const (
	// targetHosts: host or hosts (one shard).
	targetHosts targetKind = iota
	// targetShards: shard_hosts.
	targetShards
)

// Shard is one shard of the target: its name and the endpoints of its
// replicas, in failover order.
type Shard struct {
	Name  string
	Hosts []string // base URLs, "http://host:port"
}

// parseParams decodes and checks the parameters of a class whose target is
// kind. path locates them in the spec; every error starts with it, and all
// problems are reported together. getenv resolves password_env.
func parseParams(path string, raw map[string]any, kind targetKind, getenv func(string) (string, bool)) (*Params, []Shard, error) {
	var p Params
	var errs []error
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		errs = append(errs, err)
	}
	bad := func(key, format string, args ...any) {
		errs = append(errs, &spec.Error{Path: path + "." + key, Msg: fmt.Sprintf(format, args...)})
	}
	var shards []Shard
	switch kind {
	case targetHosts:
		if len(p.ShardHosts) > 0 {
			bad("shard_hosts", "this class writes one shard; use ShardedClickHouseBatchingSink for shard_hosts, or give host or hosts")
		}
		if len(p.ShardingKeyColumns) > 0 {
			bad("sharding_key_columns", "only ShardedClickHouseBatchingSink routes rows to shards; remove it")
		}
		var list []string
		switch {
		case p.Host != "" && len(p.Hosts) > 0:
			bad("hosts", "give host or hosts, not both")
		case p.Host != "":
			list = []string{p.Host}
		case len(p.Hosts) > 0:
			list = p.Hosts
		default:
			bad("host", "required: the ClickHouse HTTP endpoint (\"host:8123\" or \"http://host:8123\"), or hosts for replicas of one table")
		}
		s := Shard{Name: ""}
		for i, h := range list {
			u, err := baseURL(h)
			if err != nil {
				key := "host"
				if p.Host == "" {
					key = fmt.Sprintf("hosts[%d]", i)
				}
				bad(key, "%v", err)
				continue
			}
			s.Hosts = append(s.Hosts, u)
		}
		if dup := firstDuplicate(s.Hosts); dup != "" {
			bad("hosts", "%s is listed twice", dup)
		}
		shards = []Shard{s}
	case targetShards:
		if p.Host != "" || len(p.Hosts) > 0 {
			bad("host", "ShardedClickHouseBatchingSink takes shard_hosts (shard name → hosts); remove host and hosts")
		}
		if len(p.ShardHosts) == 0 {
			bad("shard_hosts", "required: a map of shard name to the HTTP endpoints of that shard's replicas")
		}
		names := make([]string, 0, len(p.ShardHosts))
		for n := range p.ShardHosts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			key := "shard_hosts." + n
			if n == "" || strings.ContainsAny(n, ":'\\\x00") {
				bad(key, "a shard name must be non-empty and contain no ':', quote, backslash or NUL (it becomes part of the deduplication token)")
			}
			if len(p.ShardHosts[n]) == 0 {
				bad(key, "lists no host")
			}
			s := Shard{Name: n}
			for i, h := range p.ShardHosts[n] {
				u, err := baseURL(h)
				if err != nil {
					bad(fmt.Sprintf("%s[%d]", key, i), "%v", err)
					continue
				}
				s.Hosts = append(s.Hosts, u)
			}
			if dup := firstDuplicate(s.Hosts); dup != "" {
				bad(key, "%s is listed twice", dup)
			}
			shards = append(shards, s)
		}
		for i, c := range p.ShardingKeyColumns {
			if c == "" {
				bad(fmt.Sprintf("sharding_key_columns[%d]", i), "empty column name")
			}
		}
	}
	if p.Table == "" {
		bad("table", "required: the target table's name (database in database)")
	}
	if p.Table != "" && (!validIdent(p.Table) || strings.Contains(p.Table, ".")) {
		bad("table", "%q is not a table name this sink writes (letters, digits, _, - and $; the database goes in database)", p.Table)
	}
	if !validIdent(p.Database) || strings.Contains(p.Database, ".") {
		bad("database", "%q is not a database name this sink writes (letters, digits, _, - and $)", p.Database)
	}
	for i, c := range p.Columns {
		if !validIdent(c) {
			bad(fmt.Sprintf("columns[%d]", i), "%q is not a column name this sink writes", c)
		}
	}
	if dup := firstDuplicate(p.Columns); dup != "" {
		bad("columns", "column %q is listed twice", dup)
	}
	if p.MessageIDColumn != "" && !validIdent(p.MessageIDColumn) {
		bad("message_id_column", "%q is not a column name this sink writes", p.MessageIDColumn)
	}
	if p.Format != FormatTabSeparated && p.Format != FormatJSONEachRow {
		bad("format", "must be %q or %q, got %q", FormatTabSeparated, FormatJSONEachRow, p.Format)
	}
	if p.MaxBatchRows < 1 || p.MaxBatchRows > maxBatchRowsLimit {
		bad("max_batch_rows", "must be between 1 and %d (ClickHouse's max_insert_block_size, so that a batch stays one block), got %d", maxBatchRowsLimit, p.MaxBatchRows)
	}
	if p.MaxBatchBytes < 1 {
		bad("max_batch_bytes", "must be positive, got %d", p.MaxBatchBytes)
	}
	if strings.ContainsAny(p.DeduplicationTokenPrefix, "'\\\x00") {
		bad("deduplication_token_prefix", "must not contain quotes, backslashes or NUL")
	}
	if p.ReplayHorizon < 0 {
		bad("replay_horizon", "must not be negative, got %v", p.ReplayHorizon)
	}
	if p.ReplayHorizonInserts < 0 {
		bad("replay_horizon_inserts", "must not be negative, got %d", p.ReplayHorizonInserts)
	}
	if p.MaxInsertAttempts < 1 {
		bad("max_insert_attempts", "must be at least 1 (the first attempt counts), got %d", p.MaxInsertAttempts)
	}
	if p.WriteTimeout <= 0 {
		bad("write_timeout", "must be positive, got %v", p.WriteTimeout)
	}
	if p.RetryInitialDelay < 0 {
		bad("retry_initial_delay", "must not be negative, got %v", p.RetryInitialDelay)
	}
	if p.RetryMaximumDelay < p.RetryInitialDelay {
		bad("retry_maximum_delay", "must be at least retry_initial_delay (%v), got %v", p.RetryInitialDelay, p.RetryMaximumDelay)
	}
	switch pw := p.Password.(type) {
	case nil:
		if p.PasswordEnv != "" {
			v, ok := getenv(p.PasswordEnv)
			if !ok {
				bad("password_env", "environment variable %s is not set", p.PasswordEnv)
			}
			p.password = v
		} else if v, ok := getenv(EnvPassword); ok {
			p.password = v
		}
	case string:
		if p.PasswordEnv != "" {
			bad("password", "give password or password_env, not both")
		}
		p.password = pw
	default:
		bad("password", "must be a string (value not shown: it is a secret)")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return &p, shards, nil
}

// baseURL turns a host parameter into "scheme://host:port".
func baseURL(h string) (string, error) {
	if h == "" {
		return "", errors.New("empty host")
	}
	if !strings.Contains(h, "://") {
		h = "http://" + h
	}
	u, err := url.Parse(h)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not host:port or http(s)://host:port", h)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	}
	if u.User != nil {
		return "", errors.New("credentials do not belong in the host; use user and password_env")
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return "", fmt.Errorf("%q: give only scheme, host and port", h)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":" + defaultHTTPPort
	}
	return u.Scheme + "://" + host, nil
}

// validIdent accepts the names the sink quotes with backticks: letters,
// digits, '_', '.', '-' and '$', and nothing that needs escaping.
func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '$':
		default:
			return false
		}
	}
	return true
}

func firstDuplicate(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

func osLookupEnv(k string) (string, bool) { return os.LookupEnv(k) }
