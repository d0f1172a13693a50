package statictable

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
)

// jsonlReader reads a JSON Lines table: each non-blank line is one JSON
// object (codec.RowFromJSON: integers become int64 or uint64, other
// numbers float64). Blank lines are skipped and do not count as rows.
type jsonlReader struct {
	r    io.ReadSeeker
	rows int64
	br   *bufio.Reader
	row  int64 // index of the next row
	line int   // 1-based number of the last line read
}

// openJSONL returns a reader of r, whose row count is rows (counted by
// the caller while it checksummed the file, see countLines).
func openJSONL(r io.ReadSeeker, rows int64) *jsonlReader {
	return &jsonlReader{r: r, rows: rows, br: bufio.NewReaderSize(r, 256<<10)}
}

func (j *jsonlReader) Rows() int64 { return j.rows }

func (j *jsonlReader) SeekRow(row int64) error {
	if row < 0 || row > j.rows {
		return fmt.Errorf("row %d is outside the table's %d rows", row, j.rows)
	}
	if row < j.row {
		if _, err := j.r.Seek(0, io.SeekStart); err != nil {
			return err
		}
		j.br.Reset(j.r)
		j.row, j.line = 0, 0
	}
	for j.row < row {
		if _, err := j.nextLine(); err != nil {
			if err == io.EOF {
				return fmt.Errorf("%w: the file ended at row %d, before row %d (it changed?)", errMalformed, j.row, row)
			}
			return err
		}
	}
	return nil
}

// nextLine returns the next non-blank line (without its newline) and
// counts it as a row.
func (j *jsonlReader) nextLine() ([]byte, error) {
	for {
		b, err := j.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: collect it whole.
			long := append([]byte(nil), b...)
			for err == bufio.ErrBufferFull {
				b, err = j.br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		j.line++
		if t := bytes.Trim(b, asciiSpace); len(t) > 0 {
			j.row++
			return t, nil
		}
		if err == io.EOF {
			return nil, io.EOF
		}
	}
}

func (j *jsonlReader) Next(dst []weir.Row, sizes []int) (int, error) {
	n := 0
	for n < len(dst) && j.row < j.rows {
		line, err := j.nextLine()
		if err == io.EOF {
			return n, fmt.Errorf("%w: the file ended at row %d of %d (it changed?)", errMalformed, j.row, j.rows)
		}
		if err != nil {
			return n, err
		}
		r, err := codec.RowFromJSON(line)
		if err != nil {
			return n, fmt.Errorf("%w: line %d: %v", errMalformed, j.line, err)
		}
		dst[n], sizes[n] = r, len(line)
		n++
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (j *jsonlReader) Close() error { return nil }

// asciiSpace is what a blank line may hold; lineCounter and nextLine
// must agree on it.
const asciiSpace = " \t\r\n\v\f"

// lineCounter counts the non-blank lines of the bytes written to it.
type lineCounter struct {
	rows     int64
	nonBlank bool // the current line has a non-space byte
}

func (c *lineCounter) Write(b []byte) (int, error) {
	for _, x := range b {
		switch x {
		case '\n':
			if c.nonBlank {
				c.rows++
			}
			c.nonBlank = false
		case ' ', '\t', '\r', '\v', '\f':
		default:
			c.nonBlank = true
		}
	}
	return len(b), nil
}

// total is the row count once every byte was written (a last line without
// a newline counts).
func (c *lineCounter) total() int64 {
	if c.nonBlank {
		return c.rows + 1
	}
	return c.rows
}

// writeJSONL writes the payloads of rows as JSON Lines to w.
func writeJSONL(w io.Writer, rows rowSource) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	var line []byte
	err := rows(func(p *pending) error {
		var err error
		line, err = codec.AppendRowJSON(line[:0], p.msg.Payload)
		if err != nil {
			return fmt.Errorf("%w: message %s: %w", errRowRefused, p.msg.ID, err)
		}
		line = append(line, '\n')
		_, err = bw.Write(line)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
