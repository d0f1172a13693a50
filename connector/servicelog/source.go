package servicelog

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// ClassName is ServiceLogSource's source_class_name.
const ClassName = "ServiceLogSource"

// Meta columns added to the emitted rows.
const (
	ColCycle     = "$cycle"
	ColCycleEnd  = "$cycle_end"
	ColRows      = "$rows"
	ColPartition = "$partition"
)

// Source is ServiceLogSource; see the package documentation.
type Source struct {
	id, path string
	p        *Params
	st       store.Store
	t        *externalstate.Table

	m metricVecs
}

// NewSource builds a ServiceLogSource from its spec parameters. The table
// must be declared (sp.ExternalStates) with a uint64 first key column.
func NewSource(sp connector.SourceParams) (*Source, error) {
	path := sp.Path + ".parameters"
	p, err := ParseParams(path, sp.Parameters)
	if err != nil {
		return nil, err
	}
	if sp.Store == nil {
		return nil, fmt.Errorf("%s: ServiceLogSource needs the pipeline's store (the table lives there)", sp.Path)
	}
	t, ok := sp.ExternalStates[p.Table]
	if !ok {
		return nil, fmt.Errorf("%s.table: %q is not an external state table of the pipeline; declare it under external_states (declared: %s)", path, p.Table, tableNames(sp.ExternalStates))
	}
	if first := t.Key[0]; first.Type != spec.TypeUint64 {
		return nil, fmt.Errorf("%s.table: the first key column of external state table %s, %s, is %s; a service log is partitioned by its first key column, "+
			"which must be a uint64 whose values are uniformly distributed (a hash of the rest of the key, for example)", path, p.Table, first.Name, first.Type)
	}
	return &Source{id: sp.SourceID, path: sp.Path, p: p, st: sp.Store, t: t, m: metrics()}, nil
}

func tableNames(m map[string]*externalstate.Table) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// TransformOnly implements connector.TransformOnly.
func (s *Source) TransformOnly() string {
	return "a service log's cursor scans rows that change between reads, so a replay cannot rebuild the same message ids from the same offsets as a Swift reader needs"
}

// Partitions lists "<table>#<i>/<n>" for i < partition_count.
func (s *Source) Partitions(context.Context) ([]string, error) {
	keys := make([]string, s.p.PartitionCount)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s#%d/%d", s.p.Table, i, s.p.PartitionCount)
	}
	return keys, nil
}

// Open opens partition key.
func (s *Source) Open(_ context.Context, key string) (connector.SourcePartition, error) {
	i, n, err := s.parseKey(key)
	if err != nil {
		return nil, err
	}
	lo, hi, toEnd := hashRange(i, n)
	loEnc, err := s.t.EncodeKey([]any{lo})
	if err != nil {
		return nil, err
	}
	var hiEnc []byte
	if !toEnd {
		if hiEnc, err = s.t.EncodeKey([]any{hi}); err != nil {
			return nil, err
		}
	}
	return &partition{s: s, key: key, lo: loEnc, hi: hiEnc,
		rows: s.m.rows.WithLabelValues(s.id, key), cycles: s.m.cycles.WithLabelValues(s.id, key)}, nil
}

func (s *Source) parseKey(key string) (int, int, error) {
	rest, ok := strings.CutPrefix(key, s.p.Table+"#")
	is, ns, ok2 := strings.Cut(rest, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || !ok2 || err1 != nil || err2 != nil || n != s.p.PartitionCount || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%s: service log partition %q is not one of %s#0..%d/%d", s.path, key, s.p.Table, s.p.PartitionCount-1, s.p.PartitionCount)
	}
	return i, n, nil
}

// Close implements connector.Source.
func (s *Source) Close() error { return nil }

// hashRange returns the range [lo, hi) of the uint64 space that partition
// i of n owns (toEnd: to the end of the space), the same split as the
// engine's keyed partitions.
func hashRange(i, n int) (lo, hi uint64, toEnd bool) {
	start := func(i int) uint64 {
		if i == 0 {
			return 0
		}
		q, r := bits.Div64(uint64(i), 0, uint64(n)) // ceil(i * 2^64 / n)
		if r != 0 {
			q++
		}
		return q
	}
	if i == n-1 {
		return start(i), 0, true
	}
	return start(i), start(i + 1), false
}

// partition is one partition's scan. It is used by one job at a time, on
// its goroutine.
type partition struct {
	s      *Source
	key    string
	lo, hi []byte // key encodings of the range; hi nil: to the end
	cur    cursor

	rows, cycles prometheus.Counter
}

func (p *partition) Key() string  { return p.key }
func (p *partition) Finite() bool { return p.s.p.Finite }
func (p *partition) Close() error { return nil }

// ReportCommitted implements connector.SourcePartition; the position
// lives in the job's partition state only.
func (p *partition) ReportCommitted(context.Context, connector.Offset) error { return nil }

// Resume implements connector.CursorPartition.
func (p *partition) Resume(at connector.Offset, raw []byte) error {
	if raw == nil {
		if at != 0 {
			return fmt.Errorf("service log partition %s: position %d is committed without a cursor", p.key, at)
		}
		p.cur = cursor{}
		return nil
	}
	c, err := decodeCursor(raw)
	if err != nil {
		return fmt.Errorf("service log partition %s: %w", p.key, err)
	}
	if c.offset() != at {
		return fmt.Errorf("service log partition %s: committed cursor (cycle %d, row %d) is at offset %d, the position at %d", p.key, c.Cycle, c.Rows, c.offset(), at)
	}
	p.cur = c
	return nil
}

// Cursor implements connector.CursorPartition.
func (p *partition) Cursor(next connector.Offset) ([]byte, error) {
	if next != p.cur.offset() {
		return nil, fmt.Errorf("service log partition %s: cursor asked at offset %d, the partition is at %d", p.key, next, p.cur.offset())
	}
	return p.cur.encode(), nil
}

// Read scans the next batch of the current cycle from the cursor.
func (p *partition) Read(ctx context.Context, from connector.Offset, maxRows, maxBytes int) (connector.Batch, error) {
	if from != p.cur.offset() {
		return connector.Batch{}, fmt.Errorf("service log partition %s: read at offset %d, the partition is at %d", p.key, from, p.cur.offset())
	}
	if p.cur.Done {
		return connector.Batch{Next: from, End: true}, nil
	}
	now := p.s.st.Now()
	if p.cur.Started == 0 {
		if p.cur.PrevStarted != 0 && now.Before(time.Unix(0, p.cur.PrevStarted).Add(p.s.p.MinCycleDuration.Std())) {
			return connector.Batch{Next: from, End: true}, nil // the next cycle is not due
		}
		p.cur.Started = now.UnixNano()
	}
	table := p.s.p.Table
	start, end := externalstate.Span(table, p.lo, p.hi)
	if p.cur.After != nil {
		start = append(externalstate.RowKey(table, p.cur.After), 0)
	}
	type row struct {
		key []byte
		row map[string]any
		n   int
	}
	var rows []row
	var bytesRead int
	var full bool
	var derr error
	err := p.s.st.Scan(ctx, store.Range{Table: store.ExternalStates, Lo: start, Hi: end, Limit: maxRows}, func(k, v []byte) bool {
		if len(rows) > 0 && bytesRead+len(v) > maxBytes {
			full = true
			return false
		}
		r, err := externalstate.DecodeRow(v)
		if err != nil {
			derr = fmt.Errorf("row %x: %w", externalstate.KeyOf(table, k), err)
			return false
		}
		if _, ok := r[p.s.t.Key[0].Name].(uint64); !ok {
			derr = fmt.Errorf("row %x: first key column %s holds %T, not a uint64", externalstate.KeyOf(table, k), p.s.t.Key[0].Name, r[p.s.t.Key[0].Name])
			return false
		}
		rows = append(rows, row{key: bytes.Clone(externalstate.KeyOf(table, k)), row: r, n: len(v)})
		bytesRead += len(v)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return connector.Batch{}, fmt.Errorf("service log %s, partition %s: %w", table, p.key, err)
	}
	if uint64(p.cur.Rows)+uint64(len(rows))+1 > maxRowsPerCycle {
		return connector.Batch{}, fmt.Errorf("service log %s, partition %s: more than %d rows in one cycle; raise partition_count", table, p.key, maxRowsPerCycle)
	}
	ended := !full && len(rows) < maxRows
	var b connector.Batch
	if len(rows) > 0 || (ended && p.s.p.CycleEndMarker) {
		ts, err := p.s.st.Timestamp(ctx)
		if err != nil {
			return connector.Batch{}, fmt.Errorf("service log %s, partition %s: timestamp: %w", table, p.key, err)
		}
		for _, r := range rows {
			r.row[ColCycle] = uint64(p.cur.Cycle)
			b.Records = append(b.Records, connector.Record{Offset: p.cur.offset(), WriteTimestamp: ts, Row: r.row, Size: r.n})
			p.cur.Rows++
			p.cur.After = r.key
		}
		p.rows.Add(float64(len(rows)))
		if ended && p.s.p.CycleEndMarker {
			b.Records = append(b.Records, connector.Record{Offset: p.cur.offset(), WriteTimestamp: ts, Row: map[string]any{
				ColCycle: uint64(p.cur.Cycle), ColCycleEnd: true, ColRows: uint64(p.cur.Rows), ColPartition: p.key,
			}, Size: 64})
		}
	}
	if ended {
		p.cycles.Inc()
		p.cur = cursor{Cycle: p.cur.Cycle + 1, PrevStarted: p.cur.Started, Done: p.s.p.Finite}
		b.End = p.s.p.Finite || p.s.p.MinCycleDuration > 0
	}
	b.Next = p.cur.offset()
	return b, nil
}

// Register adds ServiceLogSource to r.
func Register(r *connector.Registry) error {
	return r.RegisterSource(ClassName, func(sp connector.SourceParams) (connector.Source, error) { return NewSource(sp) })
}

var (
	_ connector.CursorPartition = (*partition)(nil)
	_ connector.TransformOnly   = (*Source)(nil)
)
