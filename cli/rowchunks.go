package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/weir-stream/weir/connector/queue"
)

// rowChunkBytes bounds one POST of rows to a running weir's admin API
// (below maxAdminBody, above queue.MaxRowBytes: a row of the largest size
// fits).
const rowChunkBytes = 32 << 20

// postRows writes the JSON lines of in to queue path (a URL with its
// query) of a running weir in chunks of at most rowChunkBytes, each one
// commit. The server numbers a chunk's lines from its first_line, so an
// error names the line in the whole input; the error says how many rows
// the chunks before it wrote (a chunk that fails writes nothing).
func postRows(c *adminConn, path string, in io.Reader) (int, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf bytes.Buffer
	written, lines, base := 0, 0, 0
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		var sb strings.Builder
		if err := c.call(http.MethodPost, path+"&first_line="+strconv.Itoa(base+1), "application/x-ndjson", bytes.NewReader(buf.Bytes()), &sb); err != nil {
			return earlierChunks(err, written)
		}
		var resp struct{ Written int }
		if err := json.Unmarshal([]byte(sb.String()), &resp); err != nil {
			return fmt.Errorf("admin API answer %q: %w", sb.String(), err)
		}
		written += resp.Written
		base = lines
		buf.Reset()
		return nil
	}
	for {
		b, err := readLine(br, queue.MaxRowBytes)
		if err != nil && err != io.EOF {
			return written, earlierChunks(fmt.Errorf("line %d: %w; nothing was written", lines+1, err), written)
		}
		if err == nil || len(b) > 0 {
			if buf.Len()+len(b)+1 > rowChunkBytes {
				if ferr := flush(); ferr != nil {
					return written, ferr
				}
			}
			lines++
			buf.Write(b)
			buf.WriteByte('\n')
		}
		if err == io.EOF {
			break
		}
	}
	return written, flush()
}

// earlierChunks adds to err, the failure of one chunk (which wrote
// nothing), what the chunks before it wrote.
func earlierChunks(err error, written int) error {
	if written == 0 {
		return err
	}
	return fmt.Errorf("%w (in that line's commit of up to %d MiB; the %d rows before it, in earlier commits, were written)", err, rowChunkBytes>>20, written)
}
