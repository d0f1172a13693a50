package open

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/store/postgres"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestBackendOf(t *testing.T) {
	for target, want := range map[string]Backend{
		"postgres://u@h/db":       Postgres,
		"postgresql://h/db?x=1":   Postgres,
		"/var/lib/weir/store":     Pebble,
		"data/store":              Pebble,
		"postgres-data/directory": Pebble,
	} {
		if got := BackendOf(target); got != want {
			t.Errorf("BackendOf(%q) = %s, want %s", target, got, want)
		}
	}
}

// TestOpenEach: a directory opens the embedded store; a postgres:// URL
// the PostgreSQL store in the URL's schema, once Init created it (twice:
// idempotent).
func TestOpenEach(t *testing.T) {
	ctx := t.Context()
	s, err := Store(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*pebble.Store); !ok {
		t.Fatalf("a directory opened a %T", s)
	}
	s.Close()
	if _, err := Init(ctx, t.TempDir()); err == nil {
		t.Fatal("Init of a directory succeeded")
	}
	if _, err := Store(ctx, "", Options{}); err == nil {
		t.Fatal("an empty address opened")
	}

	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	target := pgtest.WithParam(url, postgres.SchemaParam, schema)
	if _, err := Store(ctx, target, Options{}); err == nil || !strings.Contains(err.Error(), "weir store init") {
		t.Fatalf("Store before Init: %v, want an error naming weir store init", err)
	}
	for i, want := range []string{"applied migrations [1 2 3]", "up to date"} {
		msg, err := Init(ctx, target)
		if err != nil || !strings.Contains(msg, want) || !strings.Contains(msg, schema) {
			t.Fatalf("Init #%d = %q, %v; want it to say %q about %s", i+1, msg, err, want, schema)
		}
	}
	s, err = Store(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, ok := s.(*postgres.Store)
	if !ok || p.Schema() != schema {
		t.Fatalf("the URL opened %T (schema %v)", s, p)
	}
	txn := store.NewTxn()
	txn.Put("t", []byte("k"), []byte("v"))
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownSchemeRefused: a URL of a backend weir lacks is refused, and
// no directory named after its scheme appears.
func TestUnknownSchemeRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, target := range []string{"mysql://x", "sqlite:///tmp/db", "file://data", "Postgres+ssl://h/db"} {
		_, err := Store(t.Context(), target, Options{})
		if !errors.Is(err, ErrUnknownScheme) {
			t.Errorf("Store(%q) = %v, want ErrUnknownScheme", target, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Fatalf("refused addresses created %v", entries)
	}
	for _, path := range []string{"data", "/var/lib/weir", "a:b/c", "dir/x://y"} {
		if err := Check(path); err != nil {
			t.Errorf("Check(%q) = %v, want nil (a path)", path, err)
		}
	}
}
