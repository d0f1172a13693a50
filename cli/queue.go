package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/store"
)

func runQueue(o *Options, args []string) error {
	subs := map[string]func(*Options, []string) error{
		"create": queueCreate, "write": queueWrite, "read": queueRead, "list": queueList,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		return topUsage(o, args, `Usage: weir queue <create|write|read|list> [flags]

  create --data DIR --partitions N NAME   create a queue with N partitions
  write  --data DIR [--partition P] NAME  write JSON objects (one per line) from stdin
  read   --data DIR [--partition P] [--offset O] [--limit L] NAME
                                          print rows as JSON lines
  list   --data DIR                       list queues

The commands open DIR's store directly, or go through the admin API of a
weir run that holds it.`)
	}
	return subs[args[0]](o, args[1:])
}

// queueArgs parses a queue subcommand's flags (which include --data) and
// returns its one queue NAME; a missing --data or NAME is a usage error.
func queueArgs(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 || fs.Lookup("data").Value.String() == "" {
		return "", usageErr(fs, "need --data DIR and exactly one queue NAME")
	}
	return pos[0], nil
}

// withStore runs fn on DIR's store, or returns a client of the admin API
// of the running weir that holds it.
func withStore(dir string, readOnly bool, fn func(st store.Store) error) (remote *adminConn, err error) {
	if c, ok := runningAdmin(dir); ok {
		return c, nil
	}
	st, err := openStoreMode(dir, readOnly)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return nil, fn(st)
}

func queueCreate(o *Options, args []string) error {
	fs := newFlags(o, "queue create", "--data DIR --partitions N NAME", "Creates a queue with N partitions in DIR's store.")
	dir := fs.String("data", "", "data directory (required)")
	n := fs.Int("partitions", 1, "number of partitions")
	name, err := queueArgs(fs, args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	remote, err := withStore(*dir, false, func(st store.Store) error {
		_, err := queue.Create(ctx, st, name, *n)
		return err
	})
	if remote != nil {
		err = remote.call(http.MethodPost, "/queues/"+url.PathEscape(name)+"?partitions="+strconv.Itoa(*n), "", nil, io.Discard)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "created queue %s with %s\n", name, plural(*n, "partition", "partitions"))
	return nil
}

func queueWrite(o *Options, args []string) error {
	fs := newFlags(o, "queue write", "--data DIR [--partition P] NAME < rows.jsonl",
		"Writes JSON objects, one per line, from stdin to the queue, all in one commit.\n"+
			"Without --partition, rows are spread by a hash of their \"key\" column when\npresent (round-robin otherwise). A malformed line rejects the whole write.")
	dir := fs.String("data", "", "data directory (required)")
	part := fs.Int("partition", -1, "write every row to this partition")
	name, err := queueArgs(fs, args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var n int
	remote, err := withStore(*dir, false, func(st store.Store) error {
		q, err := queue.Open(ctx, st, name)
		if err != nil {
			return err
		}
		n, err = writeRows(ctx, q, o.Stdin, *part)
		return err
	})
	if remote != nil {
		var resp struct{ Written int }
		var sb strings.Builder
		err = remote.call(http.MethodPost, "/queues/"+url.PathEscape(name)+"/rows?partition="+strconv.Itoa(*part), "application/x-ndjson", o.Stdin, &sb)
		if err == nil {
			err = json.Unmarshal([]byte(sb.String()), &resp)
			n = resp.Written
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "wrote %s to %s\n", plural(n, "row", "rows"), name)
	return nil
}

func queueRead(o *Options, args []string) error {
	fs := newFlags(o, "queue read", "--data DIR [--partition P] [--offset O] [--limit L] NAME",
		"Prints rows as JSON lines: the row's columns plus $tablet_index, $row_index\nand $timestamp. Without --partition, every partition in turn.")
	dir := fs.String("data", "", "data directory (required)")
	part := fs.Int("partition", -1, "read only this partition")
	off := fs.Uint64("offset", 0, "first row index to read (per partition)")
	limit := fs.Int("limit", 0, "at most this many rows (0: all)")
	name, err := queueArgs(fs, args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	remote, err := withStore(*dir, true, func(st store.Store) error {
		q, err := queue.Open(ctx, st, name)
		if err != nil {
			return err
		}
		_, err = readRows(ctx, q, o.Stdout, *part, *off, *limit)
		return err
	})
	if remote != nil {
		q := fmt.Sprintf("/queues/%s/rows?partition=%d&offset=%d&limit=%d", url.PathEscape(name), *part, *off, *limit)
		err = remote.call(http.MethodGet, q, "", nil, o.Stdout)
	}
	return err
}

func queueList(o *Options, args []string) error {
	return listCommand(o, args, "queue list", "Lists the queues with their partition counts and row counts.", "/queues", listQueues)
}

// listCommand runs a list subcommand that takes only --data DIR: list on
// DIR's store, or GET path from the admin API of the weir run holding it.
func listCommand(o *Options, args []string, name, help, path string, list func(context.Context, store.Store, io.Writer) error) error {
	fs := newFlags(o, name, "--data DIR", help)
	dir := fs.String("data", "", "data directory (required)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageErr(fs, "need --data DIR")
	}
	remote, err := withStore(*dir, true, func(st store.Store) error { return list(context.Background(), st, o.Stdout) })
	if remote != nil {
		err = remote.call(http.MethodGet, path, "", nil, o.Stdout)
	}
	return err
}

func listQueues(ctx context.Context, st store.Store, w io.Writer) error {
	all, err := queue.List(ctx, st)
	if err != nil {
		return err
	}
	for _, name := range sortedNames(all) {
		q, err := queue.Open(ctx, st, name)
		if err != nil {
			return err
		}
		var rows uint64
		for p := 0; p < q.Partitions(); p++ {
			n, err := q.Len(ctx, p)
			if err != nil {
				return err
			}
			rows += n
		}
		fmt.Fprintf(w, "%s\t%s\t%d rows\n", name, plural(q.Partitions(), "partition", "partitions"), rows)
	}
	return nil
}
