package externalstate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/weir-stream/weir/store"
)

// The declarations of a store's tables, in flow_state under
// "external_state 0x00 <name>" → the Table as JSON.
const declPrefix = "external_state\x00"

func declKey(name string) []byte { return []byte(declPrefix + name) }

// Declare records the spec's tables in st, so that tools find them without
// the spec. A table already declared with other key columns is refused if
// it holds rows: they are keyed by the old columns, and reading them with
// the new ones would mix two orders. Tables the spec no longer declares
// keep their declaration and rows (readable, no longer written).
func Declare(ctx context.Context, st store.Store, tables map[string]*Table) error {
	if len(tables) == 0 {
		return nil
	}
	old, err := Declared(ctx, st)
	if err != nil {
		return err
	}
	txn := store.NewTxn()
	for _, name := range sortedNames(tables) {
		t := tables[name]
		if o, ok := old[name]; ok {
			if slices.Equal(o.Key, t.Key) && slices.Equal(o.Value, t.Value) {
				continue
			}
			if !slices.Equal(o.Key, t.Key) {
				empty := true
				if err := Scan(ctx, st, name, nil, nil, 1, func([]byte, map[string]any) (bool, error) { empty = false; return false, nil }); err != nil {
					return err
				}
				if !empty {
					return fmt.Errorf("external_states.%s.key_columns: the table holds rows keyed by %v, which differ from %v; keep the old key columns, or use a new table name", name, o.Key, t.Key)
				}
			}
		}
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		txn.Put(store.FlowState, declKey(name), b)
	}
	if txn.Empty() {
		return nil
	}
	if err := st.Commit(ctx, txn); err != nil {
		return fmt.Errorf("record external state declarations: %w", err)
	}
	return nil
}

// Declared returns the tables recorded in st, by name.
func Declared(ctx context.Context, st store.Store) (map[string]*Table, error) {
	out := map[string]*Table{}
	lo := []byte(declPrefix)
	hi := append([]byte("external_state"), 1)
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.FlowState, Lo: lo, Hi: hi}, func(k, v []byte) bool {
		var t Table
		if err := json.Unmarshal(v, &t); err != nil {
			derr = fmt.Errorf("external state declaration %q: %w", k[len(lo):], err)
			return false
		}
		out[t.Name] = &t
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read external state declarations: %w", err)
	}
	return out, derr
}

// Lookup returns the declared table name, or an error listing the
// declared ones.
func Lookup(ctx context.Context, st store.Store, name string) (*Table, error) {
	all, err := Declared(ctx, st)
	if err != nil {
		return nil, err
	}
	t, ok := all[name]
	if !ok {
		return nil, fmt.Errorf("no external state table %q in this store (declared: %v); tables are declared by a spec's external_states when weir run starts", name, sortedNames(all))
	}
	return t, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
