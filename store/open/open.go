// Package open opens a store from its address, picking the backend from
// the address's form, so that a command can take one --store flag for
// every backend:
//
//   - postgres://… or postgresql://… — store/postgres (the driver's URL,
//     plus weir_schema=NAME to pick the schema; default "weir"); the
//     schema must have been created with Init (weir store init);
//   - anything else is a directory path — store/pebble, the embedded store.
package open

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/store/postgres"
)

// Backend names a store backend.
type Backend string

const (
	Pebble   Backend = "pebble"
	Postgres Backend = "postgres"
)

// BackendOf tells which backend serves target.
func BackendOf(target string) Backend {
	if strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://") {
		return Postgres
	}
	return Pebble
}

// Options apply to every backend.
type Options struct {
	// Clock replaces the store's clock (tests). Nil: the embedded store
	// uses the local clock, PostgreSQL its own.
	Clock clock.Clock
	// Logger receives the embedded store's log (nil: slog.Default()).
	Logger *slog.Logger
}

// Store opens the store at target.
func Store(ctx context.Context, target string, o Options) (store.Store, error) {
	if target == "" {
		return nil, errors.New("store: empty address: want a directory or a postgres:// URL")
	}
	switch BackendOf(target) {
	case Postgres:
		return postgres.Open(ctx, target, postgres.Options{Clock: o.Clock})
	default:
		return pebble.Open(target, pebble.Options{Clock: o.Clock, Logger: o.Logger})
	}
}

// Init prepares the store at target for use and returns what it did, in
// words: for PostgreSQL it creates or migrates weir's schema (idempotent);
// the embedded store needs nothing (Open creates it).
func Init(ctx context.Context, target string) (string, error) {
	if BackendOf(target) != Postgres {
		return "", fmt.Errorf("store init: %q is not a postgres:// URL; the embedded store needs no init (it is created when first opened)", target)
	}
	conn, schema, err := postgres.ParseURL(target)
	if err != nil {
		return "", err
	}
	if schema == "" {
		schema = postgres.DefaultSchema
	}
	applied, err := postgres.Init(ctx, conn, schema)
	if err != nil {
		return "", err
	}
	if len(applied) == 0 {
		return fmt.Sprintf("schema %s is up to date (version %d)", schema, postgres.SchemaVersion), nil
	}
	return fmt.Sprintf("schema %s: applied migrations %v, now at version %d", schema, applied, postgres.SchemaVersion), nil
}
