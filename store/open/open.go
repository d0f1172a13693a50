// Package open opens a store from its address, picking the backend from
// the address's form, so that a command can take one --store flag for
// every backend:
//
//   - postgres://… or postgresql://… — store/postgres (the driver's URL,
//     plus weir_schema=NAME to pick the schema; default "weir"); the
//     schema must have been created with Init (weir store init);
//   - any other URL (a scheme followed by "://", such as mysql://…) is
//     refused (ErrUnknownScheme): weir has no such backend, and taking it
//     for a path would create an empty embedded store in a directory named
//     "mysql:";
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

// BackendOf tells which backend serves target (Check tells whether any
// does).
func BackendOf(target string) Backend {
	if strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://") {
		return Postgres
	}
	return Pebble
}

// ErrUnknownScheme marks an address that is a URL of no backend weir has.
var ErrUnknownScheme = errors.New("no store backend for this URL scheme")

// Check refuses an address that is a URL weir has no backend for: a
// scheme (letters, digits, '+', '-', '.') followed by "://". Such an
// address is a mistake, never a directory.
func Check(target string) error {
	if scheme, ok := URLScheme(target); ok && BackendOf(target) != Postgres {
		return fmt.Errorf("store address: %w %q: want a postgres:// URL or a directory", ErrUnknownScheme, scheme)
	}
	return nil
}

// URLScheme returns the scheme of target when it has the form
// scheme://…, the form of a URL rather than a path.
func URLScheme(target string) (string, bool) {
	i := strings.Index(target, "://")
	if i <= 0 {
		return "", false
	}
	for j, c := range target[:i] {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return "", false
		}
	}
	return target[:i], true
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
	if err := Check(target); err != nil {
		return nil, err
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
