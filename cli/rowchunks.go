package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// rowChunkBytes bounds one POST of rows to a running weir's admin API
// (below maxAdminBody, above MaxRowBytes: a row of the largest size fits).
const rowChunkBytes = 32 << 20

// chunkLine finds the line number a server's error names.
var chunkLine = regexp.MustCompile(`line (\d+): `)

// postRows writes the JSON lines of in to queue path of a running weir in
// chunks of at most rowChunkBytes, each one commit. Lines are numbered
// across chunks; an error names the line and says how many rows the
// chunks before it wrote (a chunk that fails writes nothing).
func postRows(c *adminConn, path string, in io.Reader) (int, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf bytes.Buffer
	written, lines, base := 0, 0, 0
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		var sb strings.Builder
		if err := c.call(http.MethodPost, path, "application/x-ndjson", bytes.NewReader(buf.Bytes()), &sb); err != nil {
			return chunkError(err, base, written)
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
		b, err := readLine(br, MaxRowBytes)
		if err != nil && err != io.EOF {
			return written, chunkError(fmt.Errorf("line %d: %w; nothing was written", lines+1-base, err), base, written)
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

// chunkError renumbers the line an error of a chunk names (base lines
// came before the chunk) and says what the earlier chunks wrote.
func chunkError(err error, base, written int) error {
	msg := err.Error()
	if m := chunkLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[2]] + strconv.Itoa(base+n) + msg[m[3]:]
	}
	if written > 0 {
		msg = strings.Replace(msg, "nothing was written", fmt.Sprintf("rows from that line's chunk on were not written; the %d rows before it (earlier chunks of %d MiB) were", written, rowChunkBytes>>20), 1)
	}
	return errors.New(msg)
}
