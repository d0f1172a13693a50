package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/spec"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// TestExternalStateSpecRules: a class that declares the tables it writes
// (ExternalCounter writes key_counts) is refused at load unless the
// computation lists them; the declarations are recorded in the store; a
// changed key of a table that holds rows is refused, a changed value
// schema accepted.
func TestExternalStateSpecRules(t *testing.T) {
	ctx := context.Background()
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range []string{"events", "counts"} {
		if _, err := queue.Create(ctx, st, q, 1); err != nil {
			t.Fatal(err)
		}
	}
	load := func(edit func(p *spec.Pipeline)) (*Engine, error) {
		p := example(t, "external-state")
		if edit != nil {
			edit(p)
		}
		return New(ctx, Config{Spec: p, Store: st, Classes: DefaultClasses(), Connectors: DefaultConnectors()})
	}
	_, err = load(func(p *spec.Pipeline) { p.Computations["Counter"].ExternalStateManagers = nil })
	if err == nil || !strings.Contains(err.Error(), "computations.Counter.external_state_managers: class \"ExternalCounter\" writes external state table(s) [key_counts]") {
		t.Fatalf("an undeclared write was not refused at load: %v", err)
	}
	q, err := queue.Open(ctx, st, "events")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Write(ctx, []map[string]any{{"key": "a"}, {"key": "b"}, {"key": "a"}}, []int{0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	e, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if state, err := e.Run(rctx); err != nil || state != controller.Completed {
		t.Fatalf("run: %s, %v", state, err)
	}
	decl, err := externalstate.Lookup(ctx, st, "key_counts")
	if err != nil || len(decl.Key) != 2 || decl.Key[0].Name != "key_hash" {
		t.Fatalf("recorded declaration = %+v, %v", decl, err)
	}
	_, err = load(func(p *spec.Pipeline) {
		p.ExternalStates["key_counts"].KeyColumns = []spec.Column{{Name: "key", Type: spec.TypeString}}
	})
	if err == nil || !strings.Contains(err.Error(), "external_states.key_counts.key_columns: the table holds rows") {
		t.Fatalf("a key change of a table with rows was not refused: %v", err)
	}
	if _, err := load(func(p *spec.Pipeline) {
		p.ExternalStates["key_counts"].ValueColumns = append(p.ExternalStates["key_counts"].ValueColumns, spec.Column{Name: "note", Type: spec.TypeString})
	}); err != nil {
		t.Fatalf("a new value column was refused: %v", err)
	}
	if decl, _ := externalstate.Lookup(ctx, st, "key_counts"); len(decl.Value) != 2 {
		t.Fatalf("the new value column was not recorded: %+v", decl)
	}
}
