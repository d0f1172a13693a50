package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
)

func runQueue(o *Options, args []string) error {
	subs := map[string]func(*Options, []string) error{
		"create": queueCreate, "write": queueWrite, "read": queueRead, "list": queueList,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		return topUsage(o, "queue", args, `Usage: weir queue <create|write|read|list> [flags]

  create --data DIR --partitions N NAME   create a queue with N partitions
  write  --data DIR [--partition P] NAME  write JSON objects (one per line) from stdin
  read   --data DIR [--partition P] [--offset O] [--limit L] NAME
                                          print rows as JSON lines
  list   --data DIR                       list queues

The commands open DIR's store directly, or go through the admin API of a
weir run that holds it. On PostgreSQL (the distributed mode, weir run
--store), pass --store postgres://… instead of --data DIR.

A row (one line of 'write') is at most 16 MiB.`)
	}
	return subs[args[0]](o, args[1:])
}

// location is where a queue or table command finds its store: DIR's
// embedded store (--data), or a PostgreSQL store (--store).
type location struct {
	data, store *string
}

// addLocation adds --data and --store to fs.
func addLocation(fs *flag.FlagSet) location {
	return location{
		data:  fs.String("data", "", "data directory (this or --store is required)"),
		store: fs.String("store", "", "a postgres:// URL: the PostgreSQL store of the distributed mode or of weir run --store, instead of --data"),
	}
}

// check refuses neither or both of --data and --store.
func (l location) check(fs *flag.FlagSet) error {
	if (*l.data == "") == (*l.store == "") {
		return usageErr(fs, "need --data DIR or --store URL (one of them)")
	}
	return nil
}

// queueArgs parses a queue or table subcommand's flags (which include
// --data and --store) and returns its one NAME; a missing or extra NAME,
// or not exactly one of --data and --store, is a usage error.
func queueArgs(fs *flag.FlagSet, loc location, args []string) (string, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	if err := loc.check(fs); err != nil {
		return "", err
	}
	switch {
	case len(pos) == 0:
		return "", usageErr(fs, "need a NAME")
	case len(pos) > 1:
		return "", usageErr(fs, "want one NAME, got %d arguments (%s)", len(pos), echoArgs(pos))
	case len(pos[0]) > maxNameBytes:
		return "", usageErr(fs, "NAME %s: a name is at most %d bytes", echo(pos[0]), maxNameBytes)
	}
	return pos[0], nil
}

// maxNameBytes bounds a queue or table NAME on the command line: a name
// is an identifier, and the errors that name it must stay readable.
const maxNameBytes = 1024

// withStore runs fn on the store at loc, or returns a client of the admin
// API of the running weir that holds DIR's store. A PostgreSQL store is
// shared by every process: it is always opened directly. readOnly opens
// an embedded store without writing to it (a mistyped --data creates
// nothing).
func withStore(loc location, readOnly bool, fn func(st store.Store) error) (remote *adminConn, err error) {
	if *loc.store != "" {
		if err := checkStoreURL(*loc.store, "for a data directory pass --data "+echo(*loc.store)); err != nil {
			return nil, err
		}
		st, err := open.Store(context.Background(), *loc.store, open.Options{})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return nil, fn(st)
	}
	dir := *loc.data
	if err := checkDataDir(dir); err != nil {
		return nil, err
	}
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
	fs := newFlags(o, "queue create", "(--data DIR | --store URL) --partitions N NAME", "Creates a queue with N partitions in the store.")
	loc := addLocation(fs)
	n := fs.Int("partitions", 0, fmt.Sprintf("number of partitions, 1 … %d (required)", queue.MaxPartitions))
	name, err := queueArgs(fs, loc, args)
	if err != nil {
		return err
	}
	if *n == 0 {
		return usageErr(fs, "need --partitions N")
	}
	ctx := context.Background()
	remote, err := withStore(loc, false, func(st store.Store) error {
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
	fs := newFlags(o, "queue write", "(--data DIR | --store URL) [--partition P] NAME < rows.jsonl",
		"Writes JSON objects, one per line, from stdin to the queue, all in one commit\n"+
			"(through a running weir's admin API: in commits of up to 32 MiB of input).\n"+
			"Without --partition, rows are spread by a hash of their \"key\" column when\npresent (round-robin otherwise). A malformed line, or one longer than\n"+
			"16 MiB (the row size limit), rejects the whole write: nothing is written\n(through the admin API: nothing from its chunk on; the error says what was).")
	loc := addLocation(fs)
	part := fs.Int("partition", -1, "write every row to this partition")
	name, err := queueArgs(fs, loc, args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var n int
	remote, err := withStore(loc, false, func(st store.Store) error {
		q, err := queue.Open(ctx, st, name)
		if err != nil {
			return err
		}
		n, err = writeRows(ctx, q, o.Stdin, *part, 1)
		return err
	})
	if remote != nil {
		n, err = postRows(remote, "/queues/"+url.PathEscape(name)+"/rows?partition="+strconv.Itoa(*part), o.Stdin)
	}
	if remote == nil && *loc.data != "" {
		n, err = writeResolved(o, *loc.data, n, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "wrote %s to %s\n", plural(n, "row", "rows"), name)
	return nil
}

func queueRead(o *Options, args []string) error {
	fs := newFlags(o, "queue read", "(--data DIR | --store URL) [--partition P] [--offset O] [--limit L] NAME",
		"Prints rows as JSON lines: the row's columns plus $tablet_index (the\n"+
			"partition), $row_index (the offset) and $timestamp (the commit's store\n"+
			"timestamp: unix seconds in its high 34 bits, $timestamp >> 30, and a\n"+
			"counter in the low 30; it increases strictly within a partition).\n"+
			"Without --partition, every partition in turn.")
	loc := addLocation(fs)
	part := fs.Int("partition", -1, "read only this partition")
	off := fs.Uint64("offset", 0, "first row index to read (per partition)")
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

// listCommand runs a list subcommand that takes only --data DIR or
// --store URL: list on the store, or GET path from the admin API of the
// weir run holding DIR.
func listCommand(o *Options, args []string, name, help, path string, list func(context.Context, store.Store, io.Writer) error) error {
	fs := newFlags(o, name, "(--data DIR | --store URL)", help)
	loc := addLocation(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := loc.check(fs); err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "takes no arguments, got %s", echoArgs(pos))
	}
	remote, err := withStore(loc, true, func(st store.Store) error { return list(context.Background(), st, o.Stdout) })
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

// checkStoreURL refuses a --store that is not a postgres:// URL: an
// unknown URL scheme (open.Check), or a path — with hint saying what to
// pass instead.
func checkStoreURL(addr, hint string) error {
	if err := open.Check(addr); err != nil {
		return err
	}
	if open.BackendOf(addr) != open.Postgres {
		return fmt.Errorf("--store takes a postgres:// URL; %s", hint)
	}
	return nil
}
