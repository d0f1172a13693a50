package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-stream/weir/store/open"
)

// storeInitTimeout bounds 'weir store init' (a migration waits for a
// concurrent one).
const storeInitTimeout = 2 * time.Minute

// runStoreInit is 'weir store init': it creates weir's schema in a
// PostgreSQL database or migrates it (store/postgres.Init).
func runStoreInit(o *Options, args []string) error {
	fs := newFlags(o, "store init", "--store postgres://USER@HOST:PORT/DB[?weir_schema=NAME]",
		`Create weir's tables and functions in a PostgreSQL database, or migrate
them to this weir's schema version. Idempotent: run it after installing or
upgrading weir, before the pipeline's processes start; concurrent runs wait
for each other. The URL takes the driver's parameters (sslmode, …) and
weir_schema=NAME, the schema that holds the store (default weir; one schema
is one store). Prefer PGPASSWORD or a ~/.pgpass file to a password in the URL.`)
	target := fs.String("store", "", "the store's postgres:// URL (required)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *target == "" {
		return usageErr(fs, "need --store postgres://…")
	}
	if open.BackendOf(*target) != open.Postgres {
		return usageErr(fs, "--store must be a postgres:// or postgresql:// URL; the embedded store needs no init")
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeInitTimeout)
	defer cancel()
	msg, err := open.Init(ctx, *target)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Stdout, msg)
	return nil
}
