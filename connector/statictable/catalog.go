package statictable

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// catalogTable holds the source catalogs (and the sinks' owner ids, see
// sinkOwnerKey) in the pipeline's store.
const catalogTable store.Table = "static_tables"

// tableEntry is one cataloged table. The controller (Source.Partitions)
// creates it with the table's ordinal — its place in the read order,
// never changed — and the identity it saw: size and modification time.
// The partition that reads the table first completes it (opened): the
// SHA-256 of the contents, the row count, and base, the WriteTimestamp of
// its row 0 (row i gets base+i). From then on, a table whose size, mtime
// or checksum differ is an error, never a silent re-read.
type tableEntry struct {
	Ordinal uint32
	Name    string
	Time    time.Time // from the name (table_name_pattern)
	Size    int64
	ModTime time.Time

	Opened   bool
	Checksum [32]byte
	Rows     int64
	Base     store.Timestamp

	// Skipped: an operator skipped the table (SkipTable): its partition
	// reads none of its rows from its committed position on, and its
	// identity is no longer checked.
	Skipped bool
}

// entryVersion is the encoding of an entry; a skipped entry is written as
// skippedEntryVersion (the same fields, then a flags byte), so a weir that
// does not know skipping refuses the catalog rather than read the table.
const (
	entryVersion        = 1
	skippedEntryVersion = 2
)

func (e *tableEntry) encode() []byte {
	b := e.encodeFields()
	if e.Skipped {
		b[0] = skippedEntryVersion
		b = append(b, 1)
	}
	return b
}

func (e *tableEntry) encodeFields() []byte {
	b := []byte{entryVersion}
	b = codec.AppendString(b, e.Name)
	b = codec.AppendUvarint(b, uint64(e.Time.UnixNano()))
	b = codec.AppendUvarint(b, uint64(e.Size))
	b = codec.AppendUvarint(b, uint64(e.ModTime.UnixNano()))
	if !e.Opened {
		return append(b, 0)
	}
	b = append(b, 1)
	b = append(b, e.Checksum[:]...)
	b = codec.AppendUvarint(b, uint64(e.Rows))
	return codec.AppendUvarint(b, uint64(e.Base))
}

func decodeEntry(ordinal uint32, b []byte) (*tableEntry, error) {
	if len(b) == 0 || (b[0] != entryVersion && b[0] != skippedEntryVersion) {
		return nil, errors.New("unknown catalog entry version")
	}
	e := &tableEntry{Ordinal: ordinal}
	d := decoder{b: b[1:]}
	e.Name = d.str()
	e.Time = time.Unix(0, int64(d.uvarint())).UTC()
	e.Size = int64(d.uvarint())
	e.ModTime = time.Unix(0, int64(d.uvarint())).UTC()
	if d.byte1() == 1 {
		e.Opened = true
		copy(e.Checksum[:], d.take(32))
		e.Rows = int64(d.uvarint())
		e.Base = store.Timestamp(d.uvarint())
	}
	if b[0] == skippedEntryVersion {
		e.Skipped = d.byte1()&1 != 0
	}
	if d.err != nil {
		return nil, fmt.Errorf("catalog entry %d: %w", ordinal, d.err)
	}
	return e, nil
}

// decoder reads the fields of an encoding in order; the first error
// sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, rest, err := codec.Uvarint(d.b)
	d.b, d.err = rest, err
	return v
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	s, rest, err := codec.String(d.b)
	d.b, d.err = rest, err
	return s
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = errors.New("truncated")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

// catalog is a source's table catalog: a dense, append-only list of
// tables in read order, in the pipeline's store (table static_tables,
// keys prefix + 't' + BE32(ordinal); prefix + 'h' holds the partition
// count). Writers are few — the controller appends, a partition completes
// an entry at first open — and each write is conditional on what it saw
// (CheckAbsent / CheckValue), so a second controller or a zombie job can
// never give an ordinal two meanings: the loser reloads and retries.
//
// Ordinals never change, so source offsets that embed them (see offset)
// are stable across runs.
type catalog struct {
	st     store.Store
	prefix []byte

	mu      sync.Mutex
	entries []*tableEntry // index = ordinal
	byName  map[string]*tableEntry
}

func newCatalog(st store.Store, id string) *catalog {
	return &catalog{st: st, prefix: codec.AppendString([]byte("catalog/"), id), byName: map[string]*tableEntry{}}
}

func (c *catalog) entryKey(g uint32) []byte {
	k := append(append([]byte(nil), c.prefix...), 't')
	return binary.BigEndian.AppendUint32(k, g)
}

func (c *catalog) headerKey() []byte { return append(append([]byte(nil), c.prefix...), 'h') }

// checkPartitionCount records n on first use and fails if a different
// count was recorded: the assignment of tables to partitions (ordinal
// mod n) must not change under committed offsets.
func (c *catalog) checkPartitionCount(ctx context.Context, n int) error {
	want := binary.BigEndian.AppendUint32(nil, uint32(n))
	v, ok, err := c.st.Get(ctx, catalogTable, c.headerKey())
	if err != nil {
		return err
	}
	if !ok {
		txn := store.NewTxn()
		txn.CheckAbsent(catalogTable, c.headerKey())
		txn.Put(catalogTable, c.headerKey(), want)
		if err := c.st.Commit(ctx, txn); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		if v, ok, err = c.st.Get(ctx, catalogTable, c.headerKey()); err != nil || !ok {
			return fmt.Errorf("catalog header: %v", err)
		}
	}
	if !bytes.Equal(v, want) || len(v) != 4 {
		return fmt.Errorf("partition_count is %d but the catalog was built with %d; the tables' assignment to partitions cannot change (read the directory with a new source id to start over)", n, binary.BigEndian.Uint32(v))
	}
	return nil
}

// refresh loads entries appended since the last load. REQUIRES: c.mu.
func (c *catalog) refresh(ctx context.Context) error {
	lo := c.entryKey(uint32(len(c.entries)))
	hi := append(append([]byte(nil), c.prefix...), 'u')
	var derr error
	err := c.st.Scan(ctx, store.Range{Table: catalogTable, Lo: lo, Hi: hi}, func(k, v []byte) bool {
		g := binary.BigEndian.Uint32(k[len(k)-4:])
		if int(g) != len(c.entries) {
			derr = fmt.Errorf("catalog has entry %d after %d entries (not dense)", g, len(c.entries))
			return false
		}
		e, err := decodeEntry(g, v)
		if err != nil {
			derr = err
			return false
		}
		c.entries = append(c.entries, e)
		c.byName[e.Name] = e
		return true
	})
	if err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	return derr
}

// get returns the entry of ordinal g, loading new entries from the store
// if g is beyond the cached ones (a partition may run where the catalog
// was not written). ok is false if g is not cataloged yet.
func (c *catalog) get(ctx context.Context, g uint32) (*tableEntry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(g) >= len(c.entries) {
		if err := c.refresh(ctx); err != nil {
			return nil, false, err
		}
	}
	if int(g) >= len(c.entries) {
		return nil, false, nil
	}
	e := *c.entries[g]
	return &e, true, nil
}

// snapshot returns copies of every entry, after loading new ones.
func (c *catalog) snapshot(ctx context.Context) ([]tableEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	out := make([]tableEntry, len(c.entries))
	for i, e := range c.entries {
		out[i] = *e
	}
	return out, nil
}

// errCatalogRace: another writer changed the catalog first; reload and
// decide again.
var errCatalogRace = errors.New("the catalog changed concurrently")

// appendTables gives tables the next ordinals, in order, in one commit.
// It fails with errCatalogRace if another writer appended first.
func (c *catalog) appendTables(ctx context.Context, tables []*tableEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	txn := store.NewTxn()
	for i, e := range tables {
		e.Ordinal = uint32(len(c.entries) + i)
		txn.CheckAbsent(catalogTable, c.entryKey(e.Ordinal))
		txn.Put(catalogTable, c.entryKey(e.Ordinal), e.encode())
	}
	if err := c.st.Commit(ctx, txn); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return errCatalogRace
		}
		return fmt.Errorf("write catalog: %w", err)
	}
	for _, e := range tables {
		cp := *e
		c.entries = append(c.entries, &cp)
		c.byName[e.Name] = &cp
	}
	return nil
}

// replace swaps entry old for e (same ordinal), conditional on the stored
// entry still being old. On errCatalogRace the cache holds the stored one.
func (c *catalog) replace(ctx context.Context, old, e *tableEntry) error {
	txn := store.NewTxn()
	txn.CheckValue(catalogTable, c.entryKey(e.Ordinal), old.encode())
	txn.Put(catalogTable, c.entryKey(e.Ordinal), e.encode())
	err := c.st.Commit(ctx, txn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		cp := *e
		if int(e.Ordinal) < len(c.entries) {
			c.entries[e.Ordinal] = &cp
			c.byName[e.Name] = &cp
		}
		return nil
	}
	if !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("write catalog entry %d: %w", e.Ordinal, err)
	}
	v, ok, gerr := c.st.Get(ctx, catalogTable, c.entryKey(e.Ordinal))
	if gerr == nil && ok && int(e.Ordinal) < len(c.entries) {
		if stored, derr := decodeEntry(e.Ordinal, v); derr == nil {
			c.entries[e.Ordinal] = stored
			c.byName[stored.Name] = stored
		}
	}
	return errCatalogRace
}
