package statictable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unsafe"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-stream/weir"
)

// parquetReader reads a Parquet file with parquet-go.
//
// Flat files (every top-level column a non-repeated leaf: the common case,
// and what the sink writes) take a fast path that converts each value by
// its column's type; other files are reconstructed row by row into maps.
// Value mapping: BOOLEAN → bool; INT32/INT64 → int64, or uint64 when the
// column is annotated unsigned; FLOAT/DOUBLE → float64; BYTE_ARRAY and
// FIXED_LEN_BYTE_ARRAY → string when annotated STRING, ENUM or JSON (the
// JSON text), otherwise []byte; INT96 → its 12 bytes; null → nil.
// Timestamps, dates and decimals keep their physical value.
type parquetReader struct {
	pf     *pq.File
	names  []string
	conv   []valueConv
	nested bool
	starts []int64 // starts[i]: first row of row group i; starts[len] = total

	rg   int
	rows pq.Rows
	buf  []pq.Row
}

type valueConv uint8

const (
	convBool valueConv = iota
	convInt
	convUint
	convFloat
	convDouble
	convString
	convBytes
)

// openParquet opens a Parquet file of size bytes. A file that is not
// readable Parquet (truncated, corrupt footer) is an errMalformed error.
func openParquet(r io.ReaderAt, size int64) (*parquetReader, error) {
	pf, err := pq.OpenFile(r, size, pq.SkipBloomFilters(true), pq.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable Parquet file: %v", errMalformed, err)
	}
	p := &parquetReader{pf: pf}
	for _, c := range pf.Root().Columns() {
		if !c.Leaf() || c.Repeated() {
			p.nested = true
		}
		p.names = append(p.names, c.Name())
		if c.Leaf() {
			p.conv = append(p.conv, convOf(c.Type()))
		}
	}
	var n int64
	for _, g := range pf.RowGroups() {
		p.starts = append(p.starts, n)
		n += g.NumRows()
	}
	p.starts = append(p.starts, n)
	if n != pf.NumRows() {
		return nil, fmt.Errorf("%w: row groups hold %d rows, the footer says %d", errMalformed, n, pf.NumRows())
	}
	return p, nil
}

func convOf(t pq.Type) valueConv {
	lt, ct := t.LogicalType(), t.ConvertedType()
	switch t.Kind() {
	case pq.Boolean:
		return convBool
	case pq.Int32, pq.Int64:
		if lt != nil {
			if it, ok := lt.Value.(*format.IntType); ok && !it.IsSigned {
				return convUint
			}
		}
		if ct != nil && (*ct == deprecated.Uint8 || *ct == deprecated.Uint16 || *ct == deprecated.Uint32 || *ct == deprecated.Uint64) {
			return convUint
		}
		return convInt
	case pq.Float:
		return convFloat
	case pq.Double:
		return convDouble
	case pq.ByteArray, pq.FixedLenByteArray:
		if lt != nil {
			switch lt.Value.(type) {
			case *format.StringType, *format.EnumType, *format.JsonType:
				return convString
			}
		}
		if ct != nil && (*ct == deprecated.UTF8 || *ct == deprecated.Enum || *ct == deprecated.Json) {
			return convString
		}
	}
	return convBytes
}

func (p *parquetReader) Rows() int64 { return p.starts[len(p.starts)-1] }

func (p *parquetReader) SeekRow(row int64) error {
	if row < 0 || row > p.Rows() {
		return fmt.Errorf("row %d is outside the table's %d rows", row, p.Rows())
	}
	if p.rows != nil {
		p.rows.Close()
		p.rows = nil
	}
	p.rg = sort.Search(len(p.starts)-1, func(i int) bool { return p.starts[i+1] > row })
	if p.rg == len(p.starts)-1 {
		return nil // at the end
	}
	p.rows = p.pf.RowGroups()[p.rg].Rows()
	if err := p.rows.SeekToRow(row - p.starts[p.rg]); err != nil {
		return fmt.Errorf("%w: seek to row %d: %v", errMalformed, row, err)
	}
	return nil
}

func (p *parquetReader) Next(dst []weir.Row, sizes []int) (int, error) {
	for {
		if p.rg >= len(p.starts)-1 {
			return 0, io.EOF
		}
		if p.rows == nil {
			p.rows = p.pf.RowGroups()[p.rg].Rows()
		}
		if cap(p.buf) < len(dst) {
			p.buf = make([]pq.Row, len(dst))
		}
		buf := p.buf[:len(dst)]
		n, err := p.rows.ReadRows(buf)
		for i := 0; i < n; i++ {
			r, size, cerr := p.convert(buf[i])
			if cerr != nil {
				return i, fmt.Errorf("%w: row %d: %v", errMalformed, p.starts[p.rg]+int64(i), cerr)
			}
			dst[i], sizes[i] = r, size
		}
		if n > 0 {
			return n, nil
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("%w: row group %d: %v", errMalformed, p.rg, err)
		}
		p.rows.Close()
		p.rows = nil
		p.rg++
	}
}

func (p *parquetReader) convert(row pq.Row) (weir.Row, int, error) {
	if p.nested {
		m := map[string]any{}
		if err := p.pf.Schema().Reconstruct(&m, row); err != nil {
			return nil, 0, err
		}
		r := normalizeRow(m)
		return r, rowWeight(r), nil
	}
	r := make(weir.Row, len(p.names))
	size := 1
	for _, v := range row {
		c := v.Column()
		if c < 0 || c >= len(p.names) {
			return nil, 0, fmt.Errorf("value of unknown column %d", c)
		}
		name := p.names[c]
		if v.IsNull() {
			r[name] = nil
			continue
		}
		switch p.conv[c] {
		case convBool:
			r[name] = v.Boolean()
			size++
		case convInt:
			r[name] = v.Int64()
			size += 8
		case convUint:
			if v.Kind() == pq.Int32 {
				r[name] = uint64(uint32(v.Int32()))
			} else {
				r[name] = v.Uint64()
			}
			size += 8
		case convFloat:
			r[name] = float64(v.Float())
			size += 8
		case convDouble:
			r[name] = v.Double()
			size += 8
		case convString:
			b := v.ByteArray()
			r[name] = string(b)
			size += len(b)
		default:
			b := v.ByteArray()
			r[name] = append([]byte(nil), b...)
			size += len(b)
		}
	}
	return r, size, nil
}

// normalizeRow maps values reconstructed by parquet-go onto weir's row
// value types.
func normalizeRow(m map[string]any) weir.Row {
	out := make(weir.Row, len(m))
	for k, v := range m {
		out[k] = normalizeValue(v)
	}
	return out
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case nil, bool, int64, uint64, float64, string:
		return x
	case []byte:
		return append([]byte(nil), x...)
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return uint64(x)
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	case float32:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case map[string]any:
		return normalizeRow(x)
	default:
		return fmt.Sprint(x)
	}
}

func (p *parquetReader) Close() error {
	if p.rows != nil {
		p.rows.Close()
		p.rows = nil
	}
	return nil
}

// ColumnType is the type of a column of an output Parquet table.
type ColumnType string

// The column types; every column is optional (nullable).
const (
	ColBoolean ColumnType = "boolean" // BOOLEAN
	ColInt64   ColumnType = "int64"   // INT64
	ColUint64  ColumnType = "uint64"  // INT64 annotated unsigned
	ColDouble  ColumnType = "double"  // DOUBLE
	ColString  ColumnType = "string"  // BYTE_ARRAY annotated STRING
	ColBytes   ColumnType = "bytes"   // BYTE_ARRAY
	ColJSON    ColumnType = "json"    // BYTE_ARRAY annotated JSON: any value, as JSON text
)

// Column is one column of an output table.
type Column struct {
	Name string     `yson:"name,required"`
	Type ColumnType `yson:"type,required"`
}

func (t ColumnType) node() (pq.Node, bool) {
	switch t {
	case ColBoolean:
		return pq.Leaf(pq.BooleanType), true
	case ColInt64:
		return pq.Int(64), true
	case ColUint64:
		return pq.Uint(64), true
	case ColDouble:
		return pq.Leaf(pq.DoubleType), true
	case ColString:
		return pq.String(), true
	case ColBytes:
		return pq.Leaf(pq.ByteArrayType), true
	case ColJSON:
		return pq.JSON(), true
	}
	return nil, false
}

// typeOfValue is the column type a value needs (inference).
func typeOfValue(v any) ColumnType {
	switch v.(type) {
	case bool:
		return ColBoolean
	case int64:
		return ColInt64
	case uint64:
		return ColUint64
	case float64:
		return ColDouble
	case string:
		return ColString
	case []byte:
		return ColBytes
	}
	return ColJSON
}

// inferColumns gives each column of rows the type of its values, sorted
// by name. A column holding int64 and uint64 values is int64 if every
// uint64 fits, a column holding integers and floats is double; other
// mixtures are an error naming the column. A column that is always null
// is a string column.
func inferColumns(rows []*pending) ([]Column, error) {
	types := map[string]ColumnType{}
	bigUint := map[string]bool{}
	for _, p := range rows {
		for k, v := range p.msg.Payload {
			if v == nil {
				if _, ok := types[k]; !ok {
					types[k] = ""
				}
				continue
			}
			t := typeOfValue(v)
			if u, ok := v.(uint64); ok && u > math.MaxInt64 {
				bigUint[k] = true
			}
			prev := types[k]
			switch {
			case prev == "" || prev == t:
				types[k] = t
			case isIntType(prev) && isIntType(t):
				types[k] = ColInt64
			case (isIntType(prev) || prev == ColDouble) && (isIntType(t) || t == ColDouble):
				types[k] = ColDouble
			default:
				return nil, fmt.Errorf("column %q holds both %s and %s values (message %s); declare its type in columns", k, prev, t, p.msg.ID)
			}
		}
	}
	cols := make([]Column, 0, len(types))
	for k, t := range types {
		if t == "" {
			t = ColString
		}
		if t == ColInt64 && bigUint[k] {
			return nil, fmt.Errorf("column %q holds negative int64 and uint64 values above 2^63-1; declare its type in columns", k)
		}
		cols = append(cols, Column{Name: k, Type: t})
	}
	sort.Slice(cols, func(i, j int) bool { return cols[i].Name < cols[j].Name })
	return cols, nil
}

func isIntType(t ColumnType) bool { return t == ColInt64 || t == ColUint64 }

// parquetSchema is the schema of cols, every column optional. parquet-go
// orders a group's fields by name, so cols must be sorted by name.
func parquetSchema(cols []Column) *pq.Schema {
	g := pq.Group{}
	for _, c := range cols {
		n, _ := c.Type.node()
		g[c.Name] = pq.Optional(n)
	}
	return pq.NewSchema("weir", g)
}

// parquetCodec maps the sink's compression parameter to a codec.
func parquetCodec(name string) (compress.Codec, bool) {
	switch name {
	case "", "snappy":
		return &pq.Snappy, true
	case "zstd":
		return &pq.Zstd, true
	case "gzip":
		return &pq.Gzip, true
	case "none":
		return &pq.Uncompressed, true
	}
	return nil, false
}

// writeParquet writes rows (payloads of pending messages) as one Parquet
// file to w, with key-value metadata meta. cols must be sorted by name.
// A value that does not fit its column is an error naming the column and
// the message.
func writeParquet(w io.Writer, cols []Column, codec compress.Codec, rows []*pending, meta map[string]string) error {
	opts := []pq.WriterOption{parquetSchema(cols), pq.Compression(codec), pq.CreatedBy("weir", "", "")}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, pq.KeyValueMetadata(k, meta[k]))
	}
	pw := pq.NewWriter(w, opts...)
	const chunk = 1024
	buf := make([]pq.Row, 0, chunk)
	values := make([]pq.Value, 0, chunk*len(cols))
	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c.Name] = i
	}
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := pw.WriteRows(buf)
		buf, values = buf[:0], values[:0]
		return err
	}
	for _, p := range rows {
		start, present := len(values), 0
		for i, c := range cols {
			raw, ok := p.msg.Payload[c.Name]
			if ok {
				present++
			}
			v, err := parquetValue(c.Type, raw)
			if err != nil {
				return fmt.Errorf("message %s: column %q: %w", p.msg.ID, c.Name, err)
			}
			if v.IsNull() {
				values = append(values, v.Level(0, 0, i))
			} else {
				values = append(values, v.Level(0, 1, i))
			}
		}
		if present != len(p.msg.Payload) {
			for k := range p.msg.Payload {
				if _, ok := index[k]; !ok {
					return fmt.Errorf("message %s: column %q is not declared in columns", p.msg.ID, k)
				}
			}
		}
		buf = append(buf, pq.Row(values[start:len(values):len(values)]))
		if len(buf) == chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return pw.Close()
}

var errType = errors.New("value does not fit the column type")

// parquetValue converts a row value to a Parquet value of type t; nil is
// the null value. Strings are not copied (the writer copies them).
func parquetValue(t ColumnType, v any) (pq.Value, error) {
	if v == nil {
		return pq.Value{}, nil
	}
	switch t {
	case ColBoolean:
		if b, ok := v.(bool); ok {
			return pq.BooleanValue(b), nil
		}
	case ColInt64:
		switch x := v.(type) {
		case int64:
			return pq.Int64Value(x), nil
		case uint64:
			if x <= math.MaxInt64 {
				return pq.Int64Value(int64(x)), nil
			}
		}
	case ColUint64:
		switch x := v.(type) {
		case uint64:
			return pq.Int64Value(int64(x)), nil
		case int64:
			if x >= 0 {
				return pq.Int64Value(x), nil
			}
		}
	case ColDouble:
		switch x := v.(type) {
		case float64:
			return pq.DoubleValue(x), nil
		case int64:
			return pq.DoubleValue(float64(x)), nil
		case uint64:
			return pq.DoubleValue(float64(x)), nil
		}
	case ColString, ColBytes:
		switch x := v.(type) {
		case string:
			return pq.ByteArrayValue(unsafe.Slice(unsafe.StringData(x), len(x))), nil
		case []byte:
			return pq.ByteArrayValue(x), nil
		}
	case ColJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return pq.Value{}, err
		}
		return pq.ByteArrayValue(b), nil
	}
	return pq.Value{}, fmt.Errorf("%w: %T in a %s column", errType, v, t)
}
