package statictable

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
)

// SourceClassName is StaticTableSource's source_class_name.
const SourceClassName = "StaticTableSource"

// Source is StaticTableSource. See the package documentation for the
// design; in short: Partitions (the controller) catalogs the directory's
// tables in timestamp order, and partition i of partition_count reads the
// tables whose ordinal is i mod partition_count, row range by row range,
// at offsets (ordinal, row).
type Source struct {
	id, path string
	p        *SourceParams
	dir      string
	cat      *catalog
	logf     func(format string, args ...any)

	mu           sync.Mutex
	countChecked bool
	warned       map[string]bool

	rows, cataloged, opened                              prometheus.Counter
	changed, unreadable, malformed, missing, bad, schema prometheus.Counter
}

// NewSource builds a StaticTableSource from its spec parameters. It does
// not touch the directory: the first Partitions call does.
func NewSource(sp connector.SourceParams, o Options) (*Source, error) {
	p, err := ParseSourceParams(sp.Path+".parameters", sp.Parameters)
	if err != nil {
		return nil, err
	}
	if sp.Store == nil {
		return nil, fmt.Errorf("%s: StaticTableSource needs the pipeline's store (its table catalog lives there)", sp.Path)
	}
	dir := filepath.Clean(p.Directory)
	m := metrics()
	s := &Source{
		id: sp.SourceID, path: sp.Path, p: p, dir: dir, logf: o.logf(),
		cat:    newCatalog(sp.Store, sp.Path+"\x00"+dir),
		warned: map[string]bool{},
	}
	s.rows = m.srcRows.WithLabelValues(sp.SourceID)
	s.cataloged = m.srcTables.WithLabelValues(sp.SourceID, "cataloged")
	s.opened = m.srcTables.WithLabelValues(sp.SourceID, "opened")
	s.changed = m.srcErrors.WithLabelValues(sp.SourceID, "changed")
	s.unreadable = m.srcErrors.WithLabelValues(sp.SourceID, "unreadable")
	s.malformed = m.srcErrors.WithLabelValues(sp.SourceID, "malformed")
	s.missing = m.srcErrors.WithLabelValues(sp.SourceID, "missing")
	s.bad = m.srcErrors.WithLabelValues(sp.SourceID, "name")
	s.schema = m.srcErrors.WithLabelValues(sp.SourceID, "schema")
	return s, nil
}

// fileInfo is a table file as listed.
type fileInfo struct {
	name    string
	size    int64
	modTime time.Time
}

// listTables lists the directory's table files: regular files with a
// table extension, not hidden, and — if the directory is an
// ArrivalOrderTableSink's output — listed in its progress manifest.
func (s *Source) listTables() ([]fileInfo, error) {
	es, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("%s: directory %s: %w", s.path, s.dir, err)
	}
	var published map[string]bool
	if m, ok, err := readManifestFile(s.dir); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	} else if ok {
		published = m.listed()
	}
	var out []fileInfo
	for _, e := range es {
		name := e.Name()
		if hiddenName(name) || !e.Type().IsRegular() {
			continue
		}
		if _, ok := FormatOf(name); !ok {
			s.warnOnce(name, "%s: %s is not a table (extension not .parquet, .jsonl or .ndjson); ignored", s.path, filepath.Join(s.dir, name))
			continue
		}
		if published != nil && !published[name] {
			continue // not (yet) published by the sink that writes the directory
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("%s: table %s: %w", s.path, filepath.Join(s.dir, name), err)
		}
		out = append(out, fileInfo{name: name, size: fi.Size(), modTime: fi.ModTime().UTC()})
	}
	return out, nil
}

func (s *Source) warnOnce(key, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warned[key] {
		return
	}
	s.warned[key] = true
	s.logf(format, args...)
}

// Partitions catalogs the tables that appeared since the last call and
// lists the partition keys "<directory>#<i>", i < partition_count. The
// controller calls it when it lays out the pipeline and then every
// re-list period: this is where the read order is decided.
//
// New tables get the next ordinals in the order of their names'
// timestamps (ties by name). A table whose timestamp is earlier than one
// already cataloged arrived late: it is read after the tables cataloged
// before it (logged). A cataloged table whose size or modification time
// changed gets its new identity recorded if no partition has opened it;
// if one has, see relistOpened: it is never an error of the listing, so
// new tables are cataloged and the other partitions go on.
func (s *Source) Partitions(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	checked := s.countChecked
	s.mu.Unlock()
	if !checked {
		if err := s.cat.checkPartitionCount(ctx, s.p.PartitionCount); err != nil {
			return nil, fmt.Errorf("%s.parameters.partition_count: %w", s.path, err)
		}
		s.mu.Lock()
		s.countChecked = true
		s.mu.Unlock()
	}
	for attempt := 0; ; attempt++ {
		err := s.catalogNew(ctx)
		if errors.Is(err, errCatalogRace) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	keys := make([]string, s.p.PartitionCount)
	for i := range keys {
		keys[i] = s.dir + "#" + strconv.Itoa(i)
	}
	return keys, nil
}

func (s *Source) catalogNew(ctx context.Context) error {
	entries, err := s.cat.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	files, err := s.listTables()
	if err != nil {
		return err
	}
	byName := make(map[string]*tableEntry, len(entries))
	var latest time.Time
	for i := range entries {
		byName[entries[i].Name] = &entries[i]
		if entries[i].Time.After(latest) {
			latest = entries[i].Time
		}
	}
	var errs []error
	var fresh []*tableEntry
	for _, f := range files {
		if e, ok := byName[f.name]; ok {
			if e.Skipped || (e.Size == f.size && e.ModTime.Equal(f.modTime)) {
				continue
			}
			if e.Opened {
				if err := s.relistOpened(ctx, e, f); err != nil {
					return err
				}
				continue
			}
			ne := *e
			ne.Size, ne.ModTime = f.size, f.modTime
			if err := s.cat.replace(ctx, e, &ne); err != nil {
				return err
			}
			continue
		}
		t, ok, err := s.p.tableTime(f.name)
		if err != nil {
			s.bad.Add(1)
			errs = append(errs, fmt.Errorf("%s: %w", s.path, err))
			continue
		}
		if !ok {
			s.warnOnce(f.name, "%s: %s does not match table_name_pattern; ignored", s.path, filepath.Join(s.dir, f.name))
			continue
		}
		fresh = append(fresh, &tableEntry{Name: f.name, Time: t, Size: f.size, ModTime: f.modTime})
	}
	sort.Slice(fresh, func(i, j int) bool {
		if !fresh[i].Time.Equal(fresh[j].Time) {
			return fresh[i].Time.Before(fresh[j].Time)
		}
		return fresh[i].Name < fresh[j].Name
	})
	if len(entries)+len(fresh) > maxOrdinals {
		return fmt.Errorf("%s: directory %s: more than %d tables", s.path, s.dir, maxOrdinals)
	}
	for _, e := range fresh {
		if e.Time.Before(latest) {
			s.logf("%s: table %s (%s) arrived after tables with later timestamps; it is read after them", s.path, filepath.Join(s.dir, e.Name), e.Time.Format(time.RFC3339))
		}
	}
	if len(fresh) > 0 {
		if err := s.cat.appendTables(ctx, fresh); err != nil {
			return err
		}
		s.cataloged.Add(float64(len(fresh)))
	}
	return errors.Join(errs...)
}

// relistOpened handles a listing that finds an opened table with another
// size or modification time than the catalog's. The same size and the
// recorded SHA-256: the file was touched or copied over with identical
// bytes, so the new modification time is recorded and nothing else
// changes. Otherwise the table changed after it was read: it is logged
// once per new identity and counted, not returned — an error of the
// listing would hold back every table of the source (at a restart, the
// whole source: its partitions are laid out only after a listing
// succeeds). The partition that still has rows to read in the table stops
// at it when it opens it (check compares the identity); a partition past
// it has read all of it and goes on. It returns only store errors
// (errCatalogRace: the caller lists again).
func (s *Source) relistOpened(ctx context.Context, e *tableEntry, f fileInfo) error {
	key := fmt.Sprintf("changed\x00%s\x00%d\x00%d", f.name, f.size, f.modTime.UnixNano())
	s.mu.Lock()
	seen := s.warned[key]
	s.mu.Unlock()
	if seen {
		return nil
	}
	name := filepath.Join(s.dir, f.name)
	what := ""
	if f.size == e.Size {
		sum, err := fileSHA256(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed since the listing: the next one tells
		}
		if err != nil {
			s.unreadable.Add(1)
			s.warnOnce(key, "%s: table %s cannot be read to compare its checksum: %v", s.path, name, err)
			return nil
		}
		if sum == e.Checksum {
			ne := *e
			ne.ModTime = f.modTime
			if err := s.cat.replace(ctx, e, &ne); err != nil {
				return err
			}
			s.logf("%s: table %s was modified (%s → %s) but its contents are the ones read (same SHA-256); its new modification time is recorded",
				s.path, name, e.ModTime.Format(time.RFC3339Nano), f.modTime.Format(time.RFC3339Nano))
			return nil
		}
		what = "its SHA-256 checksum differs"
	}
	s.changed.Add(1)
	s.warnOnce(key, "%v", s.changedErr(e, f.size, f.modTime, what))
	return nil
}

// fileSHA256 is the SHA-256 of the file at path.
func fileSHA256(path string) ([32]byte, error) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// changedErr says that table e changed since it was cataloged and read.
func (s *Source) changedErr(e *tableEntry, size int64, mtime time.Time, what string) error {
	if what == "" {
		what = fmt.Sprintf("size %d → %d, modified %s → %s", e.Size, size, e.ModTime.Format(time.RFC3339Nano), mtime.Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%s: table %s changed after it was read (%s); tables are immutable: restore it, or remove it if it was read to the end (a changed table is never read again)",
		s.path, filepath.Join(s.dir, e.Name), what)
}

// Open opens the partition named by key.
func (s *Source) Open(_ context.Context, key string) (connector.SourcePartition, error) {
	i := strings.LastIndexByte(key, '#')
	n, err := strconv.Atoi(key[i+1:])
	if i < 0 || key[:i] != s.dir || err != nil || n < 0 || n >= s.p.PartitionCount {
		return nil, fmt.Errorf("%s: partition key %q is not \"%s#<i>\" with i < %d", s.path, key, s.dir, s.p.PartitionCount)
	}
	return &sourcePartition{s: s, key: key, index: uint32(n), count: uint32(s.p.PartitionCount)}, nil
}

// Close releases nothing: files belong to partitions.
func (s *Source) Close() error { return nil }

// sourcePartition reads the tables of one partition in ordinal order.
//
// Invariant: cur, if set, is the open table cur.e.Ordinal, positioned at
// row cur.pos.
type sourcePartition struct {
	s            *Source
	key          string
	index, count uint32

	cur   *openTable
	rows  []weir.Row
	sizes []int
}

type openTable struct {
	e   *tableEntry
	f   *os.File
	r   tableReader
	pos int64
}

func (p *sourcePartition) Key() string  { return p.key }
func (p *sourcePartition) Finite() bool { return p.s.p.Finite }

// ReportCommitted does nothing: the position lives in the pipeline's
// partition state.
func (p *sourcePartition) ReportCommitted(context.Context, connector.Offset) error { return nil }

func (p *sourcePartition) Close() error {
	p.closeCur()
	return nil
}

func (p *sourcePartition) closeCur() {
	if p.cur != nil {
		p.cur.r.Close()
		p.cur.f.Close()
		p.cur = nil
	}
}

// mine returns the first of this partition's ordinals at or after g.
func (p *sourcePartition) mine(g uint32) uint32 {
	if r := g % p.count; r != p.index {
		if r < p.index {
			return g + p.index - r
		}
		return g + p.count - r + p.index
	}
	return g
}

// readChunk bounds the rows converted per call of the table reader, so
// that maxBytes is honoured closely.
const readChunk = 256

// Read returns rows from position from on: the rest of the current table,
// then the next tables of this partition as they are cataloged. It never
// waits: with nothing cataloged beyond, it returns End.
func (p *sourcePartition) Read(ctx context.Context, from connector.Offset, maxRows, maxBytes int) (connector.Batch, error) {
	pos := positionOf(from)
	if g := p.mine(pos.Ordinal); g != pos.Ordinal {
		pos = position{Ordinal: g}
	}
	for {
		e, ok, err := p.s.cat.get(ctx, pos.Ordinal)
		if err != nil {
			return connector.Batch{}, fmt.Errorf("%s: %w", p.s.path, err)
		}
		if !ok {
			return connector.Batch{Next: from, End: true}, nil
		}
		if e.Skipped {
			// SkipTable: none of its rows from here on.
			if p.cur != nil && p.cur.e.Ordinal == pos.Ordinal {
				p.closeCur()
			}
			p.s.warnOnce("skipped\x00"+e.Name, "%s: table %s was skipped ('weir statictable skip'): its rows from row %d on are not read", p.s.path, filepath.Join(p.s.dir, e.Name), pos.Row)
			pos = position{Ordinal: pos.Ordinal + p.count}
			continue
		}
		if p.cur == nil || p.cur.e.Ordinal != pos.Ordinal {
			p.closeCur()
			if p.cur, err = p.open(ctx, e); err != nil {
				return connector.Batch{}, err
			}
		}
		if pos.Row >= p.cur.e.Rows {
			pos = position{Ordinal: pos.Ordinal + p.count}
			continue
		}
		return p.readRows(pos, maxRows, maxBytes)
	}
}

func (p *sourcePartition) readRows(pos position, maxRows, maxBytes int) (connector.Batch, error) {
	t := p.cur
	name := filepath.Join(p.s.dir, t.e.Name)
	if t.pos != pos.Row {
		if err := t.r.SeekRow(pos.Row); err != nil {
			return connector.Batch{}, fmt.Errorf("%s: table %s: %w", p.s.path, name, err)
		}
		t.pos = pos.Row
	}
	if len(p.rows) < readChunk {
		p.rows, p.sizes = make([]weir.Row, readChunk), make([]int, readChunk)
	}
	var b connector.Batch
	bytes := 0
	for len(b.Records) < maxRows && (len(b.Records) == 0 || bytes < maxBytes) {
		want := min(readChunk, maxRows-len(b.Records))
		n, err := t.r.Next(p.rows[:want], p.sizes[:want])
		for i := 0; i < n; i++ {
			b.Records = append(b.Records, connector.Record{
				Offset:         position{Ordinal: pos.Ordinal, Row: t.pos}.offset(),
				WriteTimestamp: t.e.Base + store.Timestamp(t.pos),
				Row:            p.rows[i],
				Size:           p.sizes[i],
			})
			bytes += p.sizes[i]
			t.pos++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			p.s.malformed.Add(1)
			p.closeCur()
			return connector.Batch{}, fmt.Errorf("%s: table %s: %w", p.s.path, name, err)
		}
	}
	if cols := p.s.p.columns; cols != nil {
		for i, r := range b.Records {
			if err := checkRow(cols, r.Row); err != nil {
				p.s.schema.Add(1)
				return connector.Batch{}, fmt.Errorf("%s: table %s: row %d: %w: fix the table, or skip it with 'weir statictable skip'", p.s.path, name, pos.Row+int64(i), err)
			}
		}
	}
	if t.pos < t.e.Rows && len(b.Records) == 0 {
		p.s.malformed.Add(1)
		return connector.Batch{}, fmt.Errorf("%s: table %s: %w: row %d of %d could not be read", p.s.path, name, errMalformed, t.pos, t.e.Rows)
	}
	p.s.rows.Add(float64(len(b.Records)))
	b.Next = position{Ordinal: pos.Ordinal, Row: t.pos}.offset()
	return b, nil
}

// open opens table e, checks its identity and, on its first open,
// completes its catalog entry (checksum, rows, base timestamp).
func (p *sourcePartition) open(ctx context.Context, e *tableEntry) (*openTable, error) {
	s := p.s
	name := filepath.Join(s.dir, e.Name)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		s.missing.Add(1)
		return nil, fmt.Errorf("%s: table %s was cataloged but is gone; its rows from row 0 of this partition's position on are not read: restore it", s.path, name)
	}
	if err != nil {
		s.unreadable.Add(1)
		return nil, fmt.Errorf("%s: table %s cannot be read: %w", s.path, name, err)
	}
	t, err := p.check(ctx, f, e)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.opened.Add(1)
	return t, nil
}

func (p *sourcePartition) check(ctx context.Context, f *os.File, e *tableEntry) (*openTable, error) {
	s := p.s
	name := filepath.Join(s.dir, e.Name)
	fi, err := f.Stat()
	if err != nil {
		s.unreadable.Add(1)
		return nil, fmt.Errorf("%s: table %s: %w", s.path, name, err)
	}
	size, mtime := fi.Size(), fi.ModTime().UTC()
	// A different modification time alone is decided by the checksum
	// below: a touched table, or one copied over with the same bytes, is
	// the table that was read.
	if e.Opened && size != e.Size {
		s.changed.Add(1)
		return nil, s.changedErr(e, size, mtime, "")
	}
	// One pass over the contents: the checksum, and a JSON Lines table's
	// row count.
	h := sha256.New()
	lines := &lineCounter{}
	format, _ := FormatOf(e.Name)
	w := io.Writer(h)
	if format == JSONLines {
		w = io.MultiWriter(h, lines)
	}
	if n, err := io.Copy(w, f); err != nil {
		s.unreadable.Add(1)
		return nil, fmt.Errorf("%s: table %s cannot be read: %w", s.path, name, err)
	} else if n != size {
		s.changed.Add(1)
		return nil, fmt.Errorf("%s: table %s is being written (read %d bytes, size %d); tables must appear whole (write a temporary name, then rename)", s.path, name, n, size)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if e.Opened && sum != e.Checksum {
		s.changed.Add(1)
		return nil, s.changedErr(e, size, mtime, "its SHA-256 checksum differs")
	}
	var r tableReader
	switch format {
	case Parquet:
		pr, err := openParquet(f, size)
		if err != nil {
			s.malformed.Add(1)
			return nil, fmt.Errorf("%s: table %s: %w", s.path, name, err)
		}
		r = pr
	default:
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("%s: table %s: %w", s.path, name, err)
		}
		r = openJSONL(f, lines.total())
	}
	if r.Rows() >= maxRows {
		return nil, fmt.Errorf("%s: table %s has %d rows, more than %d", s.path, name, r.Rows(), int64(maxRows-1))
	}
	if e.Opened {
		if r.Rows() != e.Rows {
			s.changed.Add(1)
			return nil, s.changedErr(e, size, mtime, fmt.Sprintf("%d rows, was %d", r.Rows(), e.Rows))
		}
		return &openTable{e: e, f: f, r: r}, nil
	}
	ne, err := p.complete(ctx, e, size, mtime, sum, r.Rows())
	if err != nil {
		return nil, err
	}
	return &openTable{e: ne, f: f, r: r}, nil
}

// complete records table e's first open: its identity, checksum, row
// count and base timestamp. The base continues the partition's previous
// table: max(the table's own timestamp, previous base + previous rows), so
// WriteTimestamps strictly increase within the partition and are the same
// on every replay.
func (p *sourcePartition) complete(ctx context.Context, e *tableEntry, size int64, mtime time.Time, sum [32]byte, rows int64) (*tableEntry, error) {
	s := p.s
	base := store.MakeTimestamp(e.Time)
	// The partition's previous table that was opened: a table skipped
	// before it was opened emitted no row.
	for g := int64(e.Ordinal) - int64(p.count); g >= 0; g -= int64(p.count) {
		prev, ok, err := s.cat.get(ctx, uint32(g))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, err)
		}
		if ok && prev.Skipped && !prev.Opened {
			continue
		}
		if !ok || !prev.Opened {
			return nil, fmt.Errorf("%s: catalog entry %d was never read, but the partition is past it", s.path, g)
		}
		base = max(base, prev.Base+store.Timestamp(prev.Rows))
		break
	}
	ne := *e
	ne.Size, ne.ModTime, ne.Opened, ne.Checksum, ne.Rows, ne.Base = size, mtime, true, sum, rows, base
	err := s.cat.replace(ctx, e, &ne)
	if errors.Is(err, errCatalogRace) {
		// Another life of this partition recorded it first: it must agree.
		stored, ok, gerr := s.cat.get(ctx, e.Ordinal)
		if gerr != nil {
			return nil, fmt.Errorf("%s: %w", s.path, gerr)
		}
		if ok && stored.Opened && stored.Checksum == sum && stored.Rows == rows && stored.Base == base {
			return stored, nil
		}
		s.changed.Add(1)
		return nil, fmt.Errorf("%s: table %s: another reader recorded a different identity for it; it changed while being opened", s.path, filepath.Join(s.dir, e.Name))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return &ne, nil
}
