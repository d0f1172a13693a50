package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

func runTable(o *Options, args []string) error {
	subs := map[string]func(*Options, []string) error{"read": tableRead, "list": tableList}
	if len(args) == 0 || subs[args[0]] == nil {
		return topUsage(o, "table", args, `Usage: weir table <read|list> [flags]

  read --data DIR [--from KEY] [--to KEY] [--limit L] NAME
                         print the rows of external state table NAME as JSON
                         lines, in key order
  list --data DIR        list the external state tables with their key
                         columns and row counts

On PostgreSQL, pass --store postgres://… instead of --data DIR.

External state tables are declared by a spec's external_states and written
by its computations (external_state_managers), atomically with their
epochs. KEY is a JSON array of the first key column values, a key prefix:
--from '[5]' --to '[6]' reads the rows whose first key column is 5.

The commands open DIR's store directly, or go through the admin API of a
weir run that holds it.`)
	}
	return subs[args[0]](o, args[1:])
}

func tableRead(o *Options, args []string) error {
	fs := newFlags(o, "table read", "(--data DIR | --store URL) [--from KEY] [--to KEY] [--limit L] NAME",
		"Prints the committed rows of external state table NAME as JSON lines, in key\norder, from the key prefix --from (inclusive) to --to (exclusive).")
	loc := addLocation(fs)
	from := fs.String("from", "", "first key prefix, a JSON array (default: the table's start)")
	to := fs.String("to", "", "key prefix to stop before, a JSON array (default: the table's end)")
	limit := fs.Int("limit", 0, "at most this many rows (0: all)")
	name, err := queueArgs(fs, loc, args)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usageErr(fs, "--limit %d: want 0 (all rows) or a positive count", *limit)
	}
	ctx := context.Background()
	remote, err := withStore(loc, true, func(st store.Store) error {
		return readTable(ctx, st, o.Stdout, name, *from, *to, *limit)
	})
	if remote != nil {
		q := fmt.Sprintf("/tables/%s/rows?from=%s&to=%s&limit=%d", url.PathEscape(name), url.QueryEscape(*from), url.QueryEscape(*to), *limit)
		err = remote.call(http.MethodGet, q, "", nil, o.Stdout)
	}
	return err
}

func tableList(o *Options, args []string) error {
	return listCommand(o, args, "table list", "Lists the external state tables with their key columns and row counts.", "/tables", listTables)
}

// readTable writes the rows of table name in [from, to) (JSON array key
// prefixes, "" for open ends) to w as JSON lines.
func readTable(ctx context.Context, st store.Store, w io.Writer, name, from, to string, limit int) error {
	if limit < 0 {
		return fmt.Errorf("limit %d: want 0 (all rows) or a positive count", limit)
	}
	t, err := externalstate.Lookup(ctx, st, name)
	if err != nil {
		return err
	}
	lo, err := keyPrefix(t, "--from", from)
	if err != nil {
		return err
	}
	hi, err := keyPrefix(t, "--to", to)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	return externalstate.Scan(ctx, st, name, lo, hi, limit, func(_ []byte, row map[string]any) (bool, error) {
		b, err := codec.AppendRowJSON(nil, row)
		if err != nil {
			return false, err
		}
		bw.Write(b)
		return bw.WriteByte('\n') == nil, nil
	})
}

// keyPrefix decodes a JSON array of key values into the table's key
// encoding ("" is nil: an open end). Integers keep their exact value.
func keyPrefix(t *externalstate.Table, flagName, s string) ([]byte, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s %q: want a JSON array of key values (key columns: %s): %w", flagName, s, strings.Join(t.KeyNames(), ", "), err)
	}
	vals := make([]any, len(raw))
	for i, v := range raw {
		n, ok := v.(json.Number)
		if !ok {
			vals[i] = v
			continue
		}
		if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
			vals[i] = u
		} else if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			vals[i] = i
		} else if f, err := n.Float64(); err == nil {
			vals[i] = f
		} else {
			return nil, fmt.Errorf("%s: %q is not a number", flagName, n)
		}
	}
	k, err := t.EncodeKey(vals)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return k, nil
}

// listTables writes one line per declared table: name, key columns,
// value columns (or free-form) and row count.
func listTables(ctx context.Context, st store.Store, w io.Writer) error {
	all, err := externalstate.Declared(ctx, st)
	if err != nil {
		return err
	}
	for _, name := range sortedNames(all) {
		t := all[name]
		rows := 0
		if err := externalstate.Scan(ctx, st, name, nil, nil, 0, func([]byte, map[string]any) (bool, error) { rows++; return true, nil }); err != nil {
			return err
		}
		value := "free-form rows"
		if t.Value != nil {
			value = "values " + columns(t.Value)
		}
		fmt.Fprintf(w, "%s\tkey %s\t%s\t%d rows\n", name, columns(t.Key), value, rows)
	}
	return nil
}

// columns formats a column list as "(name type, ...)".
func columns(cols []spec.Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + string(c.Type)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
