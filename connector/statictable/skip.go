package statictable

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// SkippedTable is a cataloged table that SkipTable marked skipped.
type SkippedTable struct {
	// Source is the StaticTableSource's spec path, File the table's path
	// (the source's directory joined with the table's name).
	Source, File string
	// Ordinal is the table's place in the source's read order.
	Ordinal uint32
	// Opened: a partition had opened the table, so the rows before its
	// committed position in it may have been emitted; Rows is its row
	// count then.
	Opened bool
	Rows   int64
	// Already: the table was skipped before; nothing was written.
	Already bool
}

// catalogKeyPrefix starts every catalog key (see catalog).
const catalogKeyPrefix = "catalog/"

// SkipTable marks the table file as skipped in every StaticTableSource
// catalog of the pipeline's store st that lists it — the recovery from a
// table the pipeline cannot read or refuses (a malformed or unreadable
// file, a column or type weir cannot represent, a table changed after it
// was read) when the table cannot be fixed. file is the table's path
// (relative paths are taken from the working directory, as the source's
// directory is from weir run's) or, if it holds no path separator, its
// bare name.
//
// The mark is one conditional write in the store (the entries must be the
// ones read), so it holds for every later life of the pipeline: the
// table's partition reads none of its rows from its committed position on
// — they are never emitted — and goes on with its next table; the rows
// before that position were processed already. The pipeline must not be
// running: a running source keeps its cached catalog, so start it again
// after the skip.
func SkipTable(ctx context.Context, st store.Store, file string) ([]SkippedTable, error) {
	byName := !strings.ContainsRune(file, filepath.Separator)
	want, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	var found []SkippedTable
	var olds, news []*tableEntry
	var keys [][]byte
	var derr error
	lo := []byte(catalogKeyPrefix)
	hi := append([]byte(catalogKeyPrefix[:len(catalogKeyPrefix)-1]), catalogKeyPrefix[len(catalogKeyPrefix)-1]+1)
	err = st.Scan(ctx, store.Range{Table: catalogTable, Lo: lo, Hi: hi}, func(k, v []byte) bool {
		id, rest, err := codec.String(k[len(catalogKeyPrefix):])
		if err != nil || len(rest) != 5 || rest[0] != 't' {
			return true // a header or another record of the table
		}
		source, dir, ok := strings.Cut(id, "\x00")
		if !ok {
			return true
		}
		e, err := decodeEntry(binary.BigEndian.Uint32(rest[1:]), v)
		if err != nil {
			derr = fmt.Errorf("source %s: %w", source, err)
			return false
		}
		path := filepath.Join(dir, e.Name)
		if abs, err := filepath.Abs(path); !(byName && e.Name == file) && (err != nil || abs != want) {
			return true
		}
		found = append(found, SkippedTable{Source: source, File: path, Ordinal: e.Ordinal, Opened: e.Opened, Rows: e.Rows, Already: e.Skipped})
		if !e.Skipped {
			ne := *e
			ne.Skipped = true
			olds, news, keys = append(olds, e), append(news, &ne), append(keys, bytes.Clone(k))
		}
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("read the static table catalogs: %w", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no StaticTableSource has cataloged a table %s (a table is cataloged when the pipeline first lists its directory)", file)
	}
	if len(keys) == 0 {
		return found, nil
	}
	txn := store.NewTxn()
	for i, k := range keys {
		txn.CheckValue(catalogTable, k, olds[i].encode())
		txn.Put(catalogTable, k, news[i].encode())
	}
	if err := st.Commit(ctx, txn); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("the catalog changed while the skip was written (is the pipeline running?); stop it and try again: %w", err)
		}
		return nil, fmt.Errorf("write the skip: %w", err)
	}
	return found, nil
}
