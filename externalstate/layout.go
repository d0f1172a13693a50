package externalstate

import (
	"bytes"
	"context"
	"fmt"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// Rows of table T are the store rows "T 0x00 <key encoding>" of
// store.ExternalStates; table names never contain 0x00 (they are ids).

// RowKey returns the store key of the row with key encoding key in table.
func RowKey(table string, key []byte) []byte {
	b := make([]byte, 0, len(table)+1+len(key))
	b = append(append(b, table...), 0)
	return append(b, key...)
}

// KeyOf returns the key encoding of a store key of table (RowKey's inverse).
func KeyOf(table string, storeKey []byte) []byte { return storeKey[len(table)+1:] }

// Span returns the store range of table's rows with keys in [lo, hi): lo
// and hi are key encodings (of full keys or key prefixes; a prefix stands
// for the position just before every key it begins). A nil lo is the
// table's first row, a nil hi its end.
func Span(table string, lo, hi []byte) (from, to []byte) {
	from = RowKey(table, lo)
	if hi == nil {
		to = append([]byte(table), 1)
	} else {
		to = RowKey(table, hi)
	}
	return from, to
}

// EncodeRow encodes a stored row (its canonical encoding, so equal rows
// give equal bytes: the commit's conflict check compares bytes).
func EncodeRow(row map[string]any) ([]byte, error) { return codec.AppendRow(nil, row) }

// DecodeRow decodes a stored row.
func DecodeRow(b []byte) (map[string]any, error) {
	row, _, err := codec.DecodeRow(b)
	return row, err
}

// Scan calls fn with the committed rows of table whose keys are in [lo,
// hi) (key encodings, see Span), in key order, at most limit rows (0: no
// limit), until fn returns false or an error. It reads the store's
// committed state (read-committed): rows committed while it runs may or
// may not be seen.
func Scan(ctx context.Context, st store.Store, table string, lo, hi []byte, limit int, fn func(key []byte, row map[string]any) (bool, error)) error {
	from, to := Span(table, lo, hi)
	var ferr error
	err := st.Scan(ctx, store.Range{Table: store.ExternalStates, Lo: from, Hi: to, Limit: limit}, func(k, v []byte) bool {
		row, err := DecodeRow(v)
		if err != nil {
			ferr = fmt.Errorf("external state %s: row %x: %w", table, KeyOf(table, k), err)
			return false
		}
		more, err := fn(bytes.Clone(KeyOf(table, k)), row)
		if err != nil {
			ferr = err
			return false
		}
		return more
	})
	if err != nil {
		return fmt.Errorf("external state %s: scan: %w", table, err)
	}
	return ferr
}

// Get returns the committed row of table with key encoding key.
func Get(ctx context.Context, st store.Store, table string, key []byte) (map[string]any, []byte, bool, error) {
	b, ok, err := st.Get(ctx, store.ExternalStates, RowKey(table, key))
	if err != nil {
		return nil, nil, false, fmt.Errorf("external state %s: get: %w", table, err)
	}
	if !ok {
		return nil, nil, false, nil
	}
	row, err := DecodeRow(b)
	if err != nil {
		return nil, nil, false, fmt.Errorf("external state %s: row %x: %w", table, key, err)
	}
	return row, b, true, nil
}
