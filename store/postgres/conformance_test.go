package postgres

// The store conformance suite (store/storetest) on a real PostgreSQL: the
// server of DATABASE_URL, or a throwaway one pgtest starts. Every store
// the suite opens is a fresh schema; Reopen closes the pool and opens the
// same schema again, as a process restart would.

import (
	"errors"
	"sync"
	"testing"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/postgres/pgtest"
	"github.com/weir-stream/weir/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness remembers the schema of each store it opened, for Reopen.
type harness struct {
	mu      sync.Mutex
	schemas map[store.Store]string
}

// openSchema opens the store in schema with the given options (Clock set
// by the caller) and closes it when t ends.
func openSchema(t testing.TB, url, schema string, opts Options) *Store {
	t.Helper()
	opts.Schema = schema
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newStore initializes a fresh schema and opens a store on it.
func newStore(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	if _, err := Init(t.Context(), url, schema); err != nil {
		t.Fatalf("Init(%s): %v", schema, err)
	}
	return openSchema(t, url, schema, opts), schema
}

func (h *harness) Harness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, clk *clock.Manual) store.Store {
			s, schema := newStore(t, Options{Clock: clk})
			h.mu.Lock()
			h.schemas[s] = schema
			h.mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s store.Store, clk *clock.Manual) store.Store {
			h.mu.Lock()
			schema := h.schemas[s]
			h.mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatalf("Close before reopen: %v", err)
			}
			r := openSchema(t, pgtest.URL(t), schema, Options{Clock: clk})
			h.mu.Lock()
			h.schemas[r] = schema
			h.mu.Unlock()
			return r
		},
		PersistentLeases: true,
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, (&harness{schemas: map[store.Store]string{}}).Harness())
}
