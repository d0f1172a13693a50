package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

func runStore(o *Options, args []string) error {
	if len(args) > 0 && args[0] == "init" {
		return runStoreInit(o, args[1:])
	}
	if len(args) == 0 || args[0] != "check" {
		return topUsage(o, "store", args, `Usage: weir store check --data DIR
       weir store init --store postgres://…

  init    create weir's schema in a PostgreSQL database, or migrate it to
          this weir's version; idempotent (see 'weir store init --help').

  check   verify DIR's store without changing it: the checksum of every
          block of every table file, that the database opens and its keys
          are in order, that no acknowledged commit is missing from the
          write-ahead log, and weir's own invariants (dense queue row
          indexes, increasing timestamps, consumer offsets within bounds,
          outbox rows only of partitions that committed). Exit status 0:
          no damage found; 1: damage found (listed by file) or the check
          could not run. Stop the pipeline first. Table files that are
          no part of the database (leftovers of a flush that failed, on a
          full disk for example) and a read-only mount are reported as
          notes, not as damage.`)
	}
	fs := newFlags(o, "store check", "--data DIR", "See 'weir store --help'.")
	dir := fs.String("data", "", "data directory to check (required)")
	if err := parseNoArgs(fs, args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return usageErr(fs, "need --data DIR")
	}
	if c, ok := runningAdmin(*dir); ok {
		return fmt.Errorf("a weir is running on %s (admin API at http://%s); stop it first: weir pipeline stop --data %s", *dir, c.addr, *dir)
	}
	sdir := filepath.Join(*dir, storeSubdir)
	if _, err := os.Stat(sdir); err != nil {
		return noDataDir(*dir)
	}
	w := o.Stdout
	fmt.Fprintf(w, "checking %s\n", sdir)
	rep, err := pstore.CheckFiles(sdir, pstore.Options{})
	if err != nil {
		return err
	}
	var problems []string
	for _, p := range rep.Problems {
		problems = append(problems, p.File+": "+p.What)
	}
	fmt.Fprintf(w, "  tables:  %d .sst files, the checksum of every block checked\n", rep.Tables)
	for i, l := range rep.Leftovers {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more leftovers\n", len(rep.Leftovers)-maxListed)
			break
		}
		fmt.Fprintf(w, "  leftover (not damage): %s: %s\n", l.File, l.What)
	}
	if rep.ReadOnlyFS {
		fmt.Fprintln(w, "  note:    the store is on a read-only filesystem (mounted read-only): checked without Pebble's directory lock.\n"+
			"           That is not damage; a weir can run on it only once it is mounted read-write again.")
	}
	switch {
	case !rep.Opened:
		fmt.Fprintln(w, "  open:    Pebble cannot open the database")
	case rep.LevelsChecked:
		fmt.Fprintf(w, "  keys:    %d, levels consistent and in order\n", rep.Keys)
	default:
		fmt.Fprintln(w, "  keys:    the level check failed")
	}
	if rep.CommitsAcknowledged > 0 {
		fmt.Fprintf(w, "  log:     holds commits up to #%d; #%d acknowledged\n", rep.CommitsHeld, rep.CommitsAcknowledged)
	} else {
		fmt.Fprintf(w, "  log:     holds commits up to #%d (no COMMIT-MARK to compare with)\n", rep.CommitsHeld)
	}
	if len(rep.Problems) == 0 {
		st, err := pstore.Open(sdir, pstore.Options{ReadOnly: true, IgnoreLostCommits: true})
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			defer st.Close()
			ctx := context.Background()
			add := func(s string) { problems = append(problems, s) }
			qr, err := queue.Check(ctx, st, add)
			if err != nil {
				add("queues: " + err.Error())
			}
			fmt.Fprintf(w, "  queues:  %d queues, %d rows: row indexes, timestamps, offsets\n", qr.Queues, qr.Rows)
			parts, outbox, err := checkEngineTables(ctx, st, add)
			if err != nil {
				add("engine tables: " + err.Error())
			}
			fmt.Fprintf(w, "  engine:  %d partitions with committed epochs, %d outbox rows\n", parts, outbox)
		}
	} else {
		fmt.Fprintln(w, "  (weir's own invariants are not checked on damaged files)")
	}
	if len(problems) == 0 {
		fmt.Fprintln(w, "no damage found")
		return nil
	}
	fmt.Fprintf(w, "DAMAGED: %s\n", plural(len(problems), "problem", "problems"))
	for i, p := range problems {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more\n", len(problems)-maxListed)
			break
		}
		fmt.Fprintln(w, "  "+p)
	}
	return fmt.Errorf("the store in %s is damaged; restore the directory from a backup, or start again in a new one", *dir)
}

// maxListed caps the lines of a list of problems.
const maxListed = 20

// checkEngineTables verifies the engine's tables (layout in tables/keys.go):
// every partition_transactions row holds an 8-byte epoch timestamp, and
// every outbox row (partition_output_messages) belongs to a partition that
// has committed an epoch, since outbox rows are written only by epoch
// commits, which write the partition's partition_transactions row too.
func checkEngineTables(ctx context.Context, st store.Store, problem func(string)) (partitions, outbox int, err error) {
	committed := map[string]bool{}
	err = st.Scan(ctx, store.Range{Table: store.PartitionTransactions}, func(k, v []byte) bool {
		committed[string(k)] = true
		if len(v) != 8 {
			problem(fmt.Sprintf("partition_transactions %q: value of %d bytes, want 8", k, len(v)))
		}
		return true
	})
	if err != nil {
		return 0, 0, err
	}
	orphans := map[string]int{}
	err = st.Scan(ctx, store.Range{Table: store.OutputMessages}, func(k, v []byte) bool {
		outbox++
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			problem(fmt.Sprintf("partition_output_messages: malformed key %q", k))
			return true
		}
		if !committed[string(k[:i])] {
			orphans[string(k[:i])]++
		}
		return true
	})
	for _, p := range sortedNames(orphans) {
		problem(fmt.Sprintf("partition %s: %d outbox rows but no committed epoch (partition_transactions row missing)", p, orphans[p]))
	}
	return len(committed), outbox, err
}

// noDataDir is the error for a --data that names no data directory.
func noDataDir(dir string) error {
	return fmt.Errorf("%s is not a weir data directory (%s does not exist); check --data", dir, filepath.Join(dir, storeSubdir))
}

// explainDamage returns err with what to do when it reports a damaged
// store (store.ErrCorrupt), naming only the damage (not the chain of
// callers that met it); other errors come back unchanged.
func explainDamage(dir string, err error) error {
	if !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	var ce *pstore.CorruptError
	what := err.Error()
	if errors.As(err, &ce) {
		what = ce.Error()
	}
	return fmt.Errorf("%s\n\nThe data in %s is damaged, and weir stops rather than compute wrong results from it.\n"+
		"What to do: keep the directory as it is, run 'weir store check --data %s' to see what is damaged,\n"+
		"then restore %s from a backup, or start again in a new data directory", what, dir, dir, dir)
}
