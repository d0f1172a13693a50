package statictable

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/weir-stream/weir"
)

// Format is a table file format. The source detects it from the file's
// extension; the sink writes the one its format parameter names.
type Format int

// The formats.
const (
	// Parquet: extension .parquet.
	Parquet Format = iota + 1
	// JSONLines: one JSON object per line; extensions .jsonl and .ndjson.
	JSONLines
)

func (f Format) String() string {
	switch f {
	case Parquet:
		return "parquet"
	case JSONLines:
		return "jsonl"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Ext is the extension the sink gives tables of format f.
func (f Format) Ext() string {
	if f == JSONLines {
		return ".jsonl"
	}
	return ".parquet"
}

// FormatOf detects a table's format from its file name's extension
// (case-insensitive). ok is false for any other extension.
func FormatOf(name string) (f Format, ok bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".parquet":
		return Parquet, true
	case ".jsonl", ".ndjson":
		return JSONLines, true
	}
	return 0, false
}

// tableReader reads the rows of one table file, in file order, from a row
// index on. Row indexes are dense from 0: a Parquet file's rows, a JSON
// Lines file's non-blank lines.
type tableReader interface {
	// Rows is the table's row count.
	Rows() int64
	// Seek positions the reader at row index row (0 ≤ row ≤ Rows()).
	SeekRow(row int64) error
	// Next reads up to len(dst) rows into dst and their approximate sizes
	// in bytes into sizes (len(sizes) ≥ len(dst)); it returns io.EOF (with
	// n = 0) at the end. Errors name the row.
	Next(dst []weir.Row, sizes []int) (n int, err error)
	Close() error
}

// errMalformed marks a table whose contents cannot be read as its format
// says: a truncated or corrupt Parquet file, a JSON Lines line that is not
// a JSON object.
var errMalformed = errors.New("malformed table")

// rowWeight is the data weight of a row: the sizes of its values (strings
// and bytes by length, numbers 8, booleans 1, nested values summed) plus 1,
// as YTsaurus counts data weight. The sink's max_data_weight bounds it.
func rowWeight(r weir.Row) int {
	n := 1
	for _, v := range r {
		n += valueWeight(v)
	}
	return n
}

func valueWeight(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case string:
		return len(x)
	case []byte:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += valueWeight(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + valueWeight(e)
		}
		return n
	default:
		return 8
	}
}

// readAll reads every row of r from row 0 (tests and the oracle).
func readAll(r tableReader) ([]weir.Row, error) {
	if err := r.SeekRow(0); err != nil {
		return nil, err
	}
	var out []weir.Row
	buf := make([]weir.Row, 256)
	sizes := make([]int, 256)
	for {
		n, err := r.Next(buf, sizes)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
