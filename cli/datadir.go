package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// A data directory holds one pipeline's store and, while `weir run` runs,
// the address of its admin API:
//
//	DIR/store       the Pebble store (tables, queues, leases' ids, …)
//	DIR/admin.addr  host:port and instance id of the running weir's admin API
//	DIR/admin.token the admin token (mode 0600) mutating admin requests carry
const (
	storeSubdir   = "store"
	adminAddrFile = "admin.addr"
)

// openStore opens DIR's store, creating DIR if needed. If a running weir
// holds it, the error says so; if it is damaged, the error says what to do.
func openStore(dir string) (store.Store, error) {
	return openStoreMode(dir, false)
}

// openStoreMode opens DIR's store; readOnly opens an existing one without
// writing anything to it, for commands that only read: a mistyped --data
// creates nothing.
func openStoreMode(dir string, readOnly bool) (store.Store, error) {
	return openStoreOpts(dir, readOnly, pstore.Options{})
}

// openStoreOpts is openStoreMode with the embedded store's options o
// (their ReadOnly is readOnly's).
func openStoreOpts(dir string, readOnly bool, o pstore.Options) (store.Store, error) {
	if err := checkDataDir(dir); err != nil {
		return nil, err
	}
	if readOnly {
		if _, err := os.Stat(filepath.Join(dir, storeSubdir)); err != nil {
			return nil, noDataDir(dir)
		}
	} else if err := checkForeignDir(dir); err != nil {
		return nil, err
	} else if err := os.MkdirAll(filepath.Join(dir, storeSubdir), 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	o.ReadOnly = readOnly
	st, err := pstore.Open(filepath.Join(dir, storeSubdir), o)
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, explainDamage(dir, err)
		}
		if c, ok := runningAdmin(dir); ok {
			return nil, fmt.Errorf("the data directory %s is in use by a running weir (admin API at http://%s): %w", dir, c.addr, err)
		}
		return nil, fmt.Errorf("open the store in %s: %w", dir, err)
	}
	return st, nil
}

// checkDataDir refuses a --data value that is no directory: empty, or a
// URL (postgres://… belongs in --store; taken as a path it would create a
// directory named "postgres:" holding an empty store).
func checkDataDir(dir string) error {
	if dir == "" {
		return errors.New("no data directory: pass --data DIR")
	}
	if scheme, ok := open.URLScheme(dir); ok {
		if open.BackendOf(dir) == open.Postgres {
			return fmt.Errorf("--data takes a directory, not a %s:// URL: pass the URL as --store URL", scheme)
		}
		return fmt.Errorf("--data takes a directory, not a %s:// URL", scheme)
	}
	return nil
}

// checkForeignDir refuses to make a data directory of an existing
// directory that holds files of its own: a mistyped --data (the
// repository's docs/, a home directory) would otherwise get a store/
// and an admin.token among unrelated files. A directory that does not
// exist, is empty, already holds a store, or holds only weir's own files
// is accepted.
func checkForeignDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	var foreign []string
	for _, e := range entries {
		switch e.Name() {
		case storeSubdir:
			return nil
		case adminAddrFile, adminTokenFile:
		default:
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	return fmt.Errorf("%s is not a weir data directory (it has no %s/ but holds %s): "+
		"pass a new or empty directory as --data, or the data directory of an existing pipeline", dir, storeSubdir, echoArgs(foreign))
}

// errRowTooLong marks a line above queue.MaxRowBytes.
var errRowTooLong = fmt.Errorf("the line is longer than the row size limit of %d MiB (%d bytes)", queue.MaxRowBytes>>20, queue.MaxRowBytes)

// writeRows reads JSON objects, one per line, and writes them to q in one
// commit. partition < 0 spreads rows by the hash of their "key" column
// (round-robin by line when absent). A malformed line rejects the whole
// write, naming the line: invalid JSON or UTF-8, a repeated name, an
// integer outside 64 bits (codec.RowFromJSON), a "key" column that is a
// list or a map, which no computation could group by, or a line longer
// than queue.MaxRowBytes. A rejected write wrote nothing: the rows are
// committed together after the last line was read. Lines are numbered from
// firstLine (1, or where a chunk of a larger write starts: postRows).
func writeRows(ctx context.Context, q *queue.Queue, r io.Reader, partition, firstLine int) (int, error) {
	if partition < -1 || partition >= q.Partitions() {
		return 0, fmt.Errorf("partition %d out of range: queue %s has partitions 0..%d; nothing was written", partition, q.Name(), q.Partitions()-1)
	}
	var rows []weir.Row
	var parts []int
	br := bufio.NewReaderSize(r, 64<<10)
	for line := firstLine; ; line++ {
		b, err := readLine(br, queue.MaxRowBytes)
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("line %d: %w; nothing was written", line, err)
		}
		if text := bytes.TrimSpace(b); len(text) > 0 {
			row, err := codec.RowFromJSON(text)
			if err != nil {
				return 0, fmt.Errorf("line %d: %w; nothing was written", line, err)
			}
			if v := row["key"]; v != nil {
				if _, err := codec.AppendKey(nil, v); err != nil {
					return 0, fmt.Errorf("line %d: column \"key\" holds %s, which cannot be a key (weir partitions rows and groups them by it); "+
						"write a string, number or boolean there; nothing was written", line, describeValue(v))
				}
			}
			p := partition
			if p < 0 {
				p = queue.PartitionOf(row, "key", q.Partitions(), []byte(fmt.Sprint(line)))
			}
			rows = append(rows, row)
			parts = append(parts, p)
		}
		if err == io.EOF {
			break
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	if err := q.WriteResolvable(ctx, rows, parts); err != nil {
		var uw *queue.UnresolvedWriteError
		if errors.As(err, &uw) {
			return 0, err // queueWrite resolves it (writeResolved)
		}
		return 0, fmt.Errorf("%w; nothing was written", err)
	}
	return len(rows), nil
}

// readLine returns the next line of br without its newline, or
// errRowTooLong once it exceeds max bytes; io.EOF with the last line
// when the input ends.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 || len(line)+len(chunk) == max+1 && chunk[len(chunk)-1] != '\n' {
			return nil, errRowTooLong
		}
		line = append(line, chunk...)
		switch err {
		case nil:
			return line[:len(line)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return line, err
		}
	}
}

// readRows writes rows of q as JSON lines: one partition (partition >= 0)
// from offset, or every partition in turn; at most limit rows (0: all).
func readRows(ctx context.Context, q *queue.Queue, w io.Writer, partition int, offset uint64, limit int) (int, error) {
	if limit < 0 {
		return 0, fmt.Errorf("limit %d: want 0 (all rows) or a positive count", limit)
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	parts := []int{partition}
	if partition < 0 {
		parts = parts[:0]
		for p := 0; p < q.Partitions(); p++ {
			parts = append(parts, p)
		}
	}
	n := 0
	for _, p := range parts {
		left := 0
		if limit > 0 {
			left = limit - n
			if left <= 0 {
				break
			}
		}
		rows, err := q.Read(ctx, p, offset, left)
		if err != nil {
			return n, err
		}
		for _, r := range rows {
			b, err := codec.AppendRowJSON(nil, r.Columns())
			if err != nil {
				return n, err
			}
			bw.Write(b)
			bw.WriteByte('\n')
			n++
		}
	}
	return n, nil
}

// describeValue names the kind of a row value for messages.
func describeValue(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a value of type %T", v)
}
