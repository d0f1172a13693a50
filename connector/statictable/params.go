package statictable

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/weir-stream/weir/spec"
)

// SourceParams are StaticTableSource's parameters.
type SourceParams struct {
	// Directory holds the tables (required). A local path; see Dir.
	Directory string `yson:"directory,required"`
	// TableNamePattern locates each table's timestamp in its file name: a
	// regular expression whose group named ts (else its first group, else
	// its whole match) is an ISO 8601 time (layouts: see parseISO8601).
	// Files whose names do not match are not tables. The default takes a
	// timestamp at the start of the name, such as
	// "2025-06-01T12:00:00Z.parquet" or "2025-06-01.jsonl".
	TableNamePattern string `yson:"table_name_pattern"`
	// Finite: each partition ends after the last table cataloged, so the
	// pipeline completes. Otherwise the source waits for new tables.
	Finite bool `yson:"finite"`
	// PartitionCount splits the tables over this many source partitions,
	// in catalog order (table i goes to partition i mod partition_count).
	// It cannot change once a catalog exists. Default 1.
	PartitionCount int `yson:"partition_count"`
	// Columns, if set, is the tables' schema: every row may hold only
	// these columns, each value of the declared type by the rule the
	// sink's columns follow (parquetValue; null always fits). A row that
	// does not fit stops its partition with an error naming the table, the
	// row and the column — at the source, before any of its rows is
	// processed — so a table of the wrong schema can be fixed or skipped
	// ('weir statictable skip') instead of failing a sink downstream,
	// where its file is no longer known.
	Columns []Column `yson:"columns"`

	pattern *regexp.Regexp
	tsGroup int
	columns map[string]ColumnType
}

// DefaultTableNamePattern is table_name_pattern's default.
const DefaultTableNamePattern = `^(?P<ts>\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?)`

// SetDefaults sets the defaults (spec.Defaulter).
func (p *SourceParams) SetDefaults() {
	p.TableNamePattern = DefaultTableNamePattern
	p.PartitionCount = 1
}

// maxPartitions bounds partition_count.
const maxPartitions = 1024

// ParseSourceParams decodes and checks StaticTableSource's parameters;
// path is their location in the spec, and every error names the field.
func ParseSourceParams(path string, raw map[string]any) (*SourceParams, error) {
	var p SourceParams
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		return nil, err
	}
	var errs []error
	if p.Directory == "" {
		errs = append(errs, fmt.Errorf("%s.directory: must not be empty", path))
	}
	if p.PartitionCount < 1 || p.PartitionCount > maxPartitions {
		errs = append(errs, fmt.Errorf("%s.partition_count: must be between 1 and %d, got %d", path, maxPartitions, p.PartitionCount))
	}
	errs = append(errs, checkColumns(path, p.Columns)...)
	if len(p.Columns) > 0 {
		p.columns = map[string]ColumnType{}
		for _, c := range p.Columns {
			p.columns[c.Name] = c.Type
		}
	}
	re, err := regexp.Compile(p.TableNamePattern)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s.table_name_pattern: %w", path, err))
	} else {
		p.pattern = re
		p.tsGroup = re.SubexpIndex("ts")
		if p.tsGroup < 0 && re.NumSubexp() > 0 {
			p.tsGroup = 1
		}
		if p.tsGroup < 0 {
			p.tsGroup = 0
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// SinkParams are ArrivalOrderTableSink's parameters.
type SinkParams struct {
	// OutputDirectory receives the tables and the progress manifest
	// (required; created if missing). A local path; see Dir.
	OutputDirectory string `yson:"output_directory,required"`
	// TablePeriod is the grid's slot length: whole seconds, at least 1s.
	// Default 1h.
	TablePeriod spec.Duration `yson:"table_period"`
	// TableTTL is how long a table lives (required): it expires at
	// max(slot start, creation) + table_ttl and is removed. table_ttl /
	// table_period must be at most 40000.
	TableTTL spec.Duration `yson:"table_ttl,required"`
	// MaxRowCount and MaxDataWeight close a table early: a table holds at
	// most this many rows and this much data weight (see rowWeight). A
	// single row heavier than max_data_weight is a table by itself.
	// Defaults 1,000,000 rows and 256 MiB.
	MaxRowCount   int64 `yson:"max_row_count"`
	MaxDataWeight int64 `yson:"max_data_weight"`
	// Format is parquet (default) or jsonl.
	Format string `yson:"format"`
	// Columns fixes the Parquet schema (name and type of each column; rows
	// with other columns are an error). Without it each table's schema is
	// inferred from its rows (see inferColumns).
	Columns []Column `yson:"columns"`
	// Compression of Parquet tables: snappy (default), zstd, gzip or none.
	Compression string `yson:"compression"`
	// CloseDelay: a table whose slot has ended by the wall clock closes
	// once no row arrived for close_delay. Default 1s.
	CloseDelay spec.Duration `yson:"close_delay"`

	format Format
}

// The sink's defaults and limits.
const (
	DefaultTablePeriod   = time.Hour
	DefaultMaxRowCount   = 1_000_000
	DefaultMaxDataWeight = 256 << 20
	DefaultCloseDelay    = time.Second
	// MaxSlotsPerTTL bounds table_ttl / table_period (Flow's limit).
	MaxSlotsPerTTL = 40000
)

// SetDefaults sets the defaults (spec.Defaulter).
func (p *SinkParams) SetDefaults() {
	p.TablePeriod = spec.Duration(DefaultTablePeriod)
	p.MaxRowCount = DefaultMaxRowCount
	p.MaxDataWeight = DefaultMaxDataWeight
	p.Format = "parquet"
	p.Compression = "snappy"
	p.CloseDelay = spec.Duration(DefaultCloseDelay)
}

// ParseSinkParams decodes and checks ArrivalOrderTableSink's parameters;
// path is their location in the spec, and every error names the field.
func ParseSinkParams(path string, raw map[string]any) (*SinkParams, error) {
	var p SinkParams
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		return nil, err
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	if p.OutputDirectory == "" {
		bad("output_directory", "must not be empty")
	}
	period, ttl := p.TablePeriod.Std(), p.TableTTL.Std()
	switch {
	case period < time.Second:
		bad("table_period", "must be at least 1s, got %v", period)
	case period%time.Second != 0:
		bad("table_period", "must be whole seconds (table names have second precision), got %v", period)
	}
	switch {
	case ttl <= 0:
		bad("table_ttl", "must be positive, got %v", ttl)
	case period >= time.Second && ttl/period > MaxSlotsPerTTL:
		bad("table_ttl", "table_ttl / table_period must be at most %d, got %v / %v = %d", MaxSlotsPerTTL, ttl, period, ttl/period)
	}
	if p.MaxRowCount < 1 {
		bad("max_row_count", "must be positive, got %d", p.MaxRowCount)
	}
	if p.MaxDataWeight < 1 {
		bad("max_data_weight", "must be positive, got %d", p.MaxDataWeight)
	}
	if p.CloseDelay < 0 {
		bad("close_delay", "must not be negative")
	}
	switch p.Format {
	case "parquet":
		p.format = Parquet
	case "jsonl":
		p.format = JSONLines
		if len(p.Columns) > 0 {
			bad("columns", "only Parquet tables have a schema; remove columns or use format = parquet")
		}
	default:
		bad("format", "%q is not a format; use parquet or jsonl", p.Format)
	}
	if _, ok := parquetCodec(p.Compression); !ok {
		bad("compression", "%q is not a codec; use snappy, zstd, gzip or none", p.Compression)
	}
	errs = append(errs, checkColumns(path, p.Columns)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkColumns checks a columns parameter at path: names present and
// distinct, types known.
func checkColumns(path string, cols []Column) []error {
	var errs []error
	seen := map[string]bool{}
	for i, c := range cols {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s.columns[%d].name: must not be empty", path, i))
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("%s.columns[%d].name: column %q is declared twice", path, i, c.Name))
		}
		seen[c.Name] = true
		if _, ok := c.Type.node(); !ok {
			errs = append(errs, fmt.Errorf("%s.columns[%d].type: %q is not a column type; use boolean, int64, uint64, double, string, bytes or json", path, i, c.Type))
		}
	}
	return errs
}
