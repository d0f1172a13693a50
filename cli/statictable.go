package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weir-stream/weir/connector/statictable"
)

// runStaticTable is 'weir statictable': operations on the catalogs of a
// pipeline's StaticTableSources.
func runStaticTable(o *Options, args []string) error {
	if len(args) == 0 || args[0] != "skip" {
		return topUsage(o, "statictable", args, `Usage: weir statictable skip --data DIR FILE...

  skip --data DIR FILE...  mark input tables skipped in the pipeline's store:
                           their rows (from the partition's committed
                           position on) are never read; the partition goes
                           on with its next table

A StaticTableSource stops at a table it cannot read or refuses — a
malformed or unreadable file, a column or type weir cannot represent, a
table changed after it was read — with an error naming the file, and the
partition waits there. Fix the file and the pipeline goes on; if it cannot
be fixed, stop the pipeline, skip the table, and run it again. FILE is the
table's path (as the error names it) or its bare name. The skip is recorded
in the source's catalog in DIR's store, so it holds for every later run;
rows of the table that were processed before the stop stay processed.`)
	}
	fs := newFlags(o, "statictable skip", "--data DIR FILE...",
		"Marks input tables skipped in the catalogs of the pipeline's StaticTableSources:\n"+
			"their rows from the committed position on are never read. The pipeline must be stopped.")
	dir := fs.String("data", "", "data directory (required)")
	files, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if *dir == "" || len(files) == 0 {
		return usageErr(fs, "need --data DIR and at least one FILE")
	}
	if _, ok := runningAdmin(*dir); ok {
		return errors.New("a weir run holds " + *dir + "'s store: stop it (Ctrl-C, or 'weir pipeline stop'), skip the table, then run the pipeline again (a running source keeps the catalog it read)")
	}
	if _, err := os.Stat(filepath.Join(*dir, storeSubdir)); err != nil {
		return noDataDir(*dir)
	}
	st, err := openStoreMode(*dir, false)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, f := range files {
		sk, err := statictable.SkipTable(context.Background(), st, f)
		if err != nil {
			return err
		}
		for _, s := range sk {
			switch {
			case s.Already:
				fmt.Fprintf(o.Stdout, "%s: table %s was already skipped\n", s.Source, s.File)
			case s.Opened:
				fmt.Fprintf(o.Stdout, "%s: skipped table %s (%d rows; those before its partition's committed position were processed)\n", s.Source, s.File, s.Rows)
			default:
				fmt.Fprintf(o.Stdout, "%s: skipped table %s (none of its rows was read)\n", s.Source, s.File)
			}
		}
	}
	return nil
}
