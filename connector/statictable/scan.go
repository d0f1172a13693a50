package statictable

import (
	"fmt"
	"io"
	"os"

	"github.com/weir-stream/weir"
)

// ScanTable reads every row of the table file at path (its format by its
// extension, as the source detects it) with the reader StaticTableSource
// uses, readChunk rows at a time, and hands each chunk to fn (the slice is
// reused between calls). It returns the rows read. It has no catalog, no
// store and no identity check: it measures what reading a table costs the
// source (the floor of 'weir bench') and lets tools look at a table as the
// source sees it.
func ScanTable(path string, fn func(rows []weir.Row) error) (int64, error) {
	format, ok := FormatOf(path)
	if !ok {
		return 0, fmt.Errorf("table %s: not a table (extension not .parquet, .jsonl or .ndjson)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r tableReader
	if format == Parquet {
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		pr, err := openParquet(f, fi.Size())
		if err != nil {
			return 0, fmt.Errorf("table %s: %w", path, err)
		}
		r = pr
	} else {
		lines := &lineCounter{}
		if _, err := io.Copy(lines, f); err != nil {
			return 0, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		r = openJSONL(f, lines.total())
	}
	defer r.Close()
	if err := r.SeekRow(0); err != nil {
		return 0, fmt.Errorf("table %s: %w", path, err)
	}
	rows, sizes := make([]weir.Row, readChunk), make([]int, readChunk)
	var total int64
	for {
		n, err := r.Next(rows, sizes)
		total += int64(n)
		if n > 0 {
			if ferr := fn(rows[:n]); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("table %s: %w", path, err)
		}
	}
}
