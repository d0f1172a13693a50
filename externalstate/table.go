package externalstate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
)

// Table is one declared external state table.
//
// Invariant: Key is not empty; names in Key and Value are distinct.
type Table struct {
	Name string `json:"name"`
	// Key are the key columns in sort order.
	Key []spec.Column `json:"key_columns"`
	// Value are the value columns; nil means free-form rows.
	Value []spec.Column `json:"value_columns,omitempty"`
}

// FromSpec builds the Table named name from its spec declaration.
func FromSpec(name string, s *spec.ExternalState) *Table {
	return &Table{Name: name, Key: s.KeyColumns, Value: s.ValueColumns}
}

// Tables builds every table a spec declares, by name.
func Tables(p *spec.Pipeline) map[string]*Table {
	out := make(map[string]*Table, len(p.ExternalStates))
	for name, s := range p.ExternalStates {
		if s != nil {
			out[name] = FromSpec(name, s)
		}
	}
	return out
}

// KeyNames returns the key column names, in order.
func (t *Table) KeyNames() []string {
	names := make([]string, len(t.Key))
	for i, c := range t.Key {
		names[i] = c.Name
	}
	return names
}

// EncodeKey returns the order-preserving encoding of a key or key prefix:
// vals are the values of the first len(vals) key columns, normalised to
// their declared types (an int for a uint64 column becomes a uint64, so
// that Put and Get agree on the bytes). More values than key columns, a
// nil, or a value of another type is an error naming the column.
func (t *Table) EncodeKey(vals []any) ([]byte, error) {
	if len(vals) > len(t.Key) {
		return nil, fmt.Errorf("external state %s: %d key values for %d key columns (%s)", t.Name, len(vals), len(t.Key), strings.Join(t.KeyNames(), ", "))
	}
	norm := make([]any, len(vals))
	for i, v := range vals {
		col := t.Key[i]
		if v == nil {
			return nil, fmt.Errorf("external state %s: key column %s is null; key values must be set", t.Name, col.Name)
		}
		n, err := normalise(col.Type, v)
		if err != nil {
			return nil, fmt.Errorf("external state %s: key column %s: %w", t.Name, col.Name, err)
		}
		norm[i] = n
	}
	return codec.AppendKey(nil, norm...)
}

// FullKey encodes the key of a complete key tuple (one value per key column).
func (t *Table) FullKey(vals []any) ([]byte, error) {
	if len(vals) != len(t.Key) {
		return nil, fmt.Errorf("external state %s: %d key values, want one per key column (%s)", t.Name, len(vals), strings.Join(t.KeyNames(), ", "))
	}
	return t.EncodeKey(vals)
}

// Prepare checks row against the declaration and returns its key
// encoding and a copy with its values normalised to the declared types.
// Every key column must be present and not null; with value columns
// declared, every other column must be one of them (null allowed).
func (t *Table) Prepare(row map[string]any) (key []byte, norm map[string]any, err error) {
	vals := make([]any, len(t.Key))
	norm = make(map[string]any, len(row))
	for i, col := range t.Key {
		v, ok := row[col.Name]
		if !ok {
			return nil, nil, fmt.Errorf("external state %s: the row lacks key column %s (columns: %s)", t.Name, col.Name, columnList(row))
		}
		vals[i] = v
	}
	if key, err = t.FullKey(vals); err != nil {
		return nil, nil, err
	}
	var value map[string]spec.ColumnType
	if t.Value != nil {
		value = make(map[string]spec.ColumnType, len(t.Value))
		for _, c := range t.Value {
			value[c.Name] = c.Type
		}
	}
	keyType := make(map[string]spec.ColumnType, len(t.Key))
	for _, c := range t.Key {
		keyType[c.Name] = c.Type
	}
	for name, v := range row {
		typ, isKey := keyType[name]
		if !isKey {
			if value == nil {
				norm[name] = v
				continue
			}
			var ok bool
			if typ, ok = value[name]; !ok {
				return nil, nil, fmt.Errorf("external state %s: column %s is neither a key column nor in value_columns (%s); add it to value_columns or drop it", t.Name, name, strings.Join(columnNames(t.Value), ", "))
			}
			if v == nil {
				norm[name] = nil
				continue
			}
		}
		n, err := normalise(typ, v)
		if err != nil {
			return nil, nil, fmt.Errorf("external state %s: column %s: %w", t.Name, name, err)
		}
		norm[name] = n
	}
	return key, norm, nil
}

// KeyValues returns the key column values of a stored row, in order.
func (t *Table) KeyValues(row map[string]any) []any {
	vals := make([]any, len(t.Key))
	for i, c := range t.Key {
		vals[i] = row[c.Name]
	}
	return vals
}

// normalise converts v to the Go type weir uses for columns of type typ
// (uint64, int64, float64, bool, string), or reports that it cannot hold
// such a value. Types without a scalar meaning (any, yson, json) accept
// every value the row codec accepts.
func normalise(typ spec.ColumnType, v any) (any, error) {
	switch typ {
	case "uint8", "uint16", "uint32", "uint64":
		switch x := v.(type) {
		case uint64:
			return x, nil
		case uint32:
			return uint64(x), nil
		case uint:
			return uint64(x), nil
		case int64:
			if x >= 0 {
				return uint64(x), nil
			}
		case int:
			if x >= 0 {
				return uint64(x), nil
			}
		case int32:
			if x >= 0 {
				return uint64(x), nil
			}
		}
	case "int8", "int16", "int32", "int64", "date", "datetime", "timestamp", "interval":
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case uint32:
			return int64(x), nil
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), nil
			}
		}
	case "float", "double":
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
	case "boolean":
		if x, ok := v.(bool); ok {
			return x, nil
		}
	case "string", "utf8", "uuid":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "null", "void":
		if v == nil {
			return nil, nil
		}
	default: // any, yson, json
		return v, nil
	}
	return nil, fmt.Errorf("value %v (%T) is not a %s", v, v, typ)
}

func columnNames(cols []spec.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

func columnList(r map[string]any) string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
