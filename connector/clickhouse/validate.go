package clickhouse

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// dedupMode is how the target table deduplicates a replayed INSERT.
type dedupMode int

const (
	// dedupNone: it does not (a non-replicated MergeTree without
	// non_replicated_deduplication_window, or a window of 0).
	dedupNone dedupMode = iota
	// dedupBlocks: it drops a block it has seen: by the
	// insert_deduplication_token where the server supports it, else by the
	// block's data.
	dedupBlocks
)

// dedupWindow is one known deduplication window setting of a table.
type dedupWindow struct {
	setting string
	value   int64
	seconds bool // value is seconds, else a count of blocks
}

// tableInfo is what a writer session learned about the target on one host
// when it started.
type tableInfo struct {
	host     string
	version  string
	token    bool // the server knows insert_deduplication_token
	engine   string
	family   string // "replicated", "shared", "mergetree"
	identity string // zookeeper path (replicated) or uuid (shared); "" otherwise
	dedup    dedupMode
	windows  []dedupWindow
	columns  []tableColumn // in table order
}

type tableColumn struct {
	name, typ, defaultKind string
}

// queryRows runs a SELECT that ends in FORMAT TabSeparated and splits its
// answer into unescaped fields.
func queryRows(ctx context.Context, tr Transport, sql string) ([][]string, error) {
	body, err := tr.Do(ctx, Request{Query: sql + " FORMAT TabSeparated"})
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range bytes.Split(body, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		fields := strings.Split(string(line), "\t")
		for i, f := range fields {
			fields[i] = unescapeTSV(f)
		}
		rows = append(rows, fields)
	}
	return rows, nil
}

func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// inspectTable reads the target's engine, schema, replication identity and
// deduplication settings from system tables. A missing table is a
// permanent error; a failed query is returned as it is (the caller
// classifies it).
func inspectTable(ctx context.Context, tr Transport, database, table string) (*tableInfo, error) {
	info := &tableInfo{host: tr.Endpoint()}
	rows, err := queryRows(ctx, tr, "SELECT version()")
	if err != nil {
		return nil, err
	}
	if len(rows) == 1 {
		info.version = rows[0][0]
	}
	rows, err = queryRows(ctx, tr, "SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token'")
	if err != nil {
		return nil, err
	}
	info.token = len(rows) == 1 && rows[0][0] == "1"
	where := fmt.Sprintf("database = %s AND name = %s", quoteString(database), quoteString(table))
	rows, err = queryRows(ctx, tr, "SELECT engine, engine_full FROM system.tables WHERE "+where)
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return nil, permanent("table %s.%s does not exist on %s", database, table, tr.Endpoint())
	}
	info.engine = rows[0][0]
	engineFull := rows[0][1]
	rows, err = queryRows(ctx, tr, fmt.Sprintf("SELECT name, type, default_kind FROM system.columns WHERE database = %s AND table = %s",
		quoteString(database), quoteString(table)))
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if len(r) == 3 {
			info.columns = append(info.columns, tableColumn{name: r[0], typ: r[1], defaultKind: r[2]})
		}
	}
	e := info.engine
	switch {
	case strings.HasPrefix(e, "Replicated") && strings.HasSuffix(e, "MergeTree"):
		info.family = "replicated"
	case strings.HasPrefix(e, "Shared") && strings.HasSuffix(e, "MergeTree"):
		info.family = "shared"
	case strings.HasSuffix(e, "MergeTree"):
		info.family = "mergetree"
	default:
		return info, nil // rejected by the caller, which names the engine
	}
	settings, err := mergeTreeSettings(ctx, tr, engineFull)
	if err != nil {
		return nil, err
	}
	switch info.family {
	case "replicated":
		rows, err := queryRows(ctx, tr, fmt.Sprintf("SELECT zookeeper_path FROM system.replicas WHERE database = %s AND table = %s",
			quoteString(database), quoteString(table)))
		if err != nil {
			return nil, err
		}
		if len(rows) == 1 {
			info.identity = "zookeeper:" + rows[0][0]
		}
		info.windows = knownWindows(settings, "replicated_deduplication_window", "replicated_deduplication_window_seconds")
	case "shared":
		rows, err := queryRows(ctx, tr, "SELECT toString(uuid) FROM system.tables WHERE "+where)
		if err != nil {
			return nil, err
		}
		if len(rows) == 1 {
			info.identity = "uuid:" + rows[0][0]
		}
		info.windows = knownWindows(settings, "replicated_deduplication_window", "replicated_deduplication_window_seconds")
	case "mergetree":
		info.windows = knownWindows(settings, "non_replicated_deduplication_window")
	}
	info.dedup = dedupBlocks
	for _, w := range info.windows {
		if w.value == 0 {
			info.dedup = dedupNone // a window of 0 turns deduplication off
		}
	}
	if info.family == "mergetree" && len(info.windows) == 0 {
		info.dedup = dedupNone // a server without non_replicated_deduplication_window
	}
	return info, nil
}

// mergeTreeSettings returns the server's MergeTree defaults of the
// deduplication windows with the table's own SETTINGS applied.
func mergeTreeSettings(ctx context.Context, tr Transport, engineFull string) (map[string]string, error) {
	rows, err := queryRows(ctx, tr, "SELECT name, value FROM system.merge_tree_settings WHERE name IN "+
		"('replicated_deduplication_window', 'replicated_deduplication_window_seconds', 'non_replicated_deduplication_window')")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range rows {
		if len(r) == 2 {
			out[r[0]] = r[1]
		}
	}
	if i := strings.LastIndex(engineFull, " SETTINGS "); i >= 0 {
		for _, kv := range strings.Split(engineFull[i+len(" SETTINGS "):], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			k = strings.TrimSpace(k)
			if _, known := out[k]; known {
				out[k] = strings.Trim(strings.TrimSpace(v), "'")
			}
		}
	}
	return out, nil
}

func knownWindows(settings map[string]string, names ...string) []dedupWindow {
	var out []dedupWindow
	for _, n := range names {
		v, ok := settings[n]
		if !ok {
			continue
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, dedupWindow{setting: n, value: x, seconds: strings.HasSuffix(n, "_seconds")})
	}
	return out
}

// targetRules are the acceptance rules of one sink class.
type targetRules struct {
	// exactlyOnce: the class promises exactly-once (it degrades, with a
	// warning, on a single non-deduplicating MergeTree).
	exactlyOnce bool
}

// check applies the rules to a table found on one of hostCount hosts of a
// shard and returns the warnings to log. An error is permanent.
func (r targetRules) check(info *tableInfo, database, table string, hostCount int) (warnings []string, err error) {
	name := database + "." + table
	switch {
	case info.engine == "Distributed":
		return nil, permanent("%s on %s is a Distributed table, which the sink rejects: a replay through it is not deduplicated reliably; write to its local tables with ShardedClickHouseBatchingSink (shard_hosts)", name, info.host)
	case info.family == "":
		return nil, permanent("%s on %s has engine %s, outside the MergeTree family; the sink writes MergeTree-family tables only (exactly-once needs ReplicatedMergeTree, ReplicatedReplacingMergeTree, ReplicatedSummingMergeTree, ReplicatedAggregatingMergeTree or SharedMergeTree)", name, info.host, info.engine)
	case hostCount > 1 && info.identity == "":
		return nil, permanent("%s on %s is a non-replicated %s, but hosts lists %d hosts: they cannot be proven to hold the same logical table; give one host, or use a Replicated table", name, info.host, info.engine, hostCount)
	}
	if r.exactlyOnce && info.dedup == dedupNone {
		warnings = append(warnings, fmt.Sprintf("%s on %s (%s) does not deduplicate inserted blocks: exactly-once degrades to at-least-once (a replayed batch is inserted again); use a Replicated*MergeTree or SharedMergeTree, or MergeTree with non_replicated_deduplication_window > 0", name, info.host, info.engine))
	}
	return warnings, nil
}

// sameTable checks that a later host of a shard shows the same logical
// table as the first one validated.
func sameTable(ref, info *tableInfo, database, table string) error {
	if info.engine != ref.engine || info.identity != ref.identity {
		return permanent("%s.%s on %s (%s, %s) is not the same logical table as on %s (%s, %s): failover between them could lose or duplicate rows",
			database, table, info.host, info.engine, orNone(info.identity), ref.host, ref.engine, orNone(ref.identity))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no replication identity"
	}
	return s
}

// insertColumns decides the INSERT's column list from the table: the
// columns parameter, or every plain column (no DEFAULT, MATERIALIZED or
// ALIAS expression), plus message_id_column.
func insertColumns(info *tableInfo, database, table string, want []string, messageIDColumn string) ([]column, error) {
	byName := map[string]tableColumn{}
	for _, c := range info.columns {
		byName[c.name] = c
	}
	var names []string
	if len(want) > 0 {
		for _, n := range want {
			c, ok := byName[n]
			if !ok {
				return nil, permanent("columns: table %s.%s on %s has no column %q (it has %s)", database, table, info.host, n, columnNames(info.columns))
			}
			if c.defaultKind == "MATERIALIZED" || c.defaultKind == "ALIAS" {
				return nil, permanent("columns: column %q of %s.%s is %s and cannot be inserted", n, database, table, c.defaultKind)
			}
		}
		names = append(names, want...)
	} else {
		for _, c := range info.columns {
			if c.defaultKind == "" && c.name != messageIDColumn {
				names = append(names, c.name)
			}
		}
	}
	if messageIDColumn != "" {
		c, ok := byName[messageIDColumn]
		if !ok {
			return nil, permanent("message_id_column: table %s.%s on %s has no column %q", database, table, info.host, messageIDColumn)
		}
		if t, err := parseType(c.typ); err != nil || (t.kind != kindString && t.kind != kindFixedString) {
			return nil, permanent("message_id_column: column %q of %s.%s is %s; it must be String", messageIDColumn, database, table, c.typ)
		}
		found := false
		for _, n := range names {
			found = found || n == messageIDColumn
		}
		if !found {
			names = append(names, messageIDColumn)
		}
	}
	if len(names) == 0 {
		return nil, permanent("table %s.%s on %s has no column the sink can insert", database, table, info.host)
	}
	cols := make([]column, 0, len(names))
	for _, n := range names {
		c := byName[n]
		t, err := parseType(c.typ)
		if err != nil {
			return nil, permanent("column %q of %s.%s: %v", n, database, table, err)
		}
		cols = append(cols, column{name: n, typ: t, messageID: n == messageIDColumn})
	}
	return cols, nil
}

func columnNames(cs []tableColumn) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}
