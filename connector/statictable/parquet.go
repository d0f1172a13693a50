package statictable

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-stream/weir"
)

// parquetReader reads a Parquet file with parquet-go.
//
// It reads flat tables: every top-level column a non-repeated primitive
// (the common case, and what the sink writes). Nested columns (lists,
// maps, structs, variants) and compression codecs parquet-go cannot
// decode are refused when the table is opened, with an error naming the
// column. Each column's values are converted by its physical type and
// its annotation (logical type, else converted type): the table in the
// package documentation ("Parquet values") is the mapping, colConvOf
// implements it.
//
// Rows are read column by column: Next reads the chunk's values of each
// column (page by page, no row assembly) and then builds the chunk's rows
// from them, so a row costs its map and its values, not parquet-go's
// row-major reassembly.
type parquetReader struct {
	pf     *pq.File
	names  []string
	conv   []colConv
	starts []int64 // starts[i]: first row of row group i; starts[len] = total

	// rg is the current row group and row the next row of the table; cols
	// (nil until the group is opened) read the group's columns, each at
	// row.
	rg   int
	row  int64
	cols []columnReader
	vals [][]pq.Value // per column, the values of the chunk being built
}

// columnReader reads one column chunk's values page by page. Values of
// BYTE_ARRAY columns point into their page's buffers, so a page that is
// read to its end is released (its buffers go back to parquet-go's pools)
// only after the rows built from it hold copies: release.
type columnReader struct {
	pages  pq.Pages
	page   pq.Page
	values pq.ValueReader
	spent  []pq.Page
}

// read fills buf with the next values, across pages; it returns io.EOF if
// the chunk ends first.
func (c *columnReader) read(buf []pq.Value) (int, error) {
	n := 0
	for n < len(buf) {
		if c.values == nil {
			p, err := c.pages.ReadPage()
			if err != nil {
				return n, err
			}
			c.page, c.values = p, p.Values()
		}
		k, err := c.values.ReadValues(buf[n:])
		n += k
		switch {
		case err == io.EOF:
			c.spent = append(c.spent, c.page)
			c.page, c.values = nil, nil
		case err != nil:
			return n, err
		case k == 0:
			return n, io.ErrNoProgress
		}
	}
	return n, nil
}

// release releases the pages read to their end.
func (c *columnReader) release() {
	for i, p := range c.spent {
		pq.Release(p)
		c.spent[i] = nil
	}
	c.spent = c.spent[:0]
}

func (c *columnReader) close() {
	c.release()
	if c.page != nil {
		pq.Release(c.page)
		c.page, c.values = nil, nil
	}
	c.pages.Close()
}

// colConv is how one column's values become weir values.
type colConv struct {
	kind  valueConv
	scale int32 // convDecimal: the decimal's scale
}

type valueConv uint8

const (
	convNull    valueConv = iota // logical type NULL: always nil
	convBool                     // bool
	convInt32                    // INT32 sign-extended to int64
	convUint32                   // INT32 zero-extended to uint64
	convInt64                    // int64
	convUint64                   // uint64
	convInt96                    // INT96 timestamp: int64 nanoseconds since the Unix epoch
	convFloat                    // FLOAT widened to float64
	convDouble                   // float64
	convFloat16                  // FLOAT16 (FIXED_LEN_BYTE_ARRAY(2)) widened to float64
	convString                   // string
	convBytes                    // []byte
	convUUID                     // UUID: its canonical text form
	convDecimal                  // DECIMAL: its exact decimal text
)

// errUnsupported marks a Parquet table weir cannot represent: a nested
// column, an annotation that is not valid on its column's physical type,
// a compression codec parquet-go cannot decode. The error names the
// column.
var errUnsupported = errors.New("unsupported Parquet table")

// readableCodecs are the compression codecs parquet-go decodes.
var readableCodecs = map[format.CompressionCodec]bool{
	format.Uncompressed: true, format.Snappy: true, format.Gzip: true,
	format.Brotli: true, format.Zstd: true, format.Lz4Raw: true,
}

// openParquet opens a Parquet file of size bytes. A file that is not
// readable Parquet (truncated, corrupt footer) is an errMalformed error; a
// table weir cannot represent is an errUnsupported error naming the
// column.
func openParquet(r io.ReaderAt, size int64) (*parquetReader, error) {
	pf, err := pq.OpenFile(r, size, pq.SkipBloomFilters(true), pq.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable Parquet file: %v", errMalformed, err)
	}
	p := &parquetReader{pf: pf}
	schema := pf.Metadata().Schema
	if len(schema) == 0 {
		return nil, fmt.Errorf("%w: the footer has no schema", errMalformed)
	}
	top, _ := schema[0].NumChildren.Get()
	for i := 1; i <= int(top) && i < len(schema); i++ {
		// The elements before are top-level leaves (a group returns
		// below), so schema[i] is top-level column i-1.
		el := &schema[i]
		if kind := nestedKind(el); kind != "" {
			return nil, fmt.Errorf("%w: column %q is %s; StaticTableSource reads flat tables only (every top-level column a non-repeated primitive): flatten it, or store it as JSON text", errUnsupported, el.Name, kind)
		}
		cv, err := colConvOf(el)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", errUnsupported, el.Name, err)
		}
		p.names = append(p.names, el.Name)
		p.conv = append(p.conv, cv)
	}
	leaves := pf.Root().Columns()
	if len(leaves) != len(p.names) {
		return nil, fmt.Errorf("%w: the schema has %d top-level columns, parquet-go sees %d", errMalformed, len(p.names), len(leaves))
	}
	for i, c := range leaves {
		if c.Name() != p.names[i] {
			return nil, fmt.Errorf("%w: column %d is %q in the footer, %q to parquet-go", errMalformed, i, p.names[i], c.Name())
		}
	}
	for g, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			if c := cc.MetaData.Codec; !readableCodecs[c] {
				return nil, fmt.Errorf("%w: column %q (row group %d) is compressed with %s, which weir cannot decode; it reads UNCOMPRESSED, SNAPPY, GZIP, BROTLI, ZSTD and LZ4_RAW: rewrite the table with one of those",
					errUnsupported, strings.Join(cc.MetaData.PathInSchema, "."), g, codecName(c))
			}
			if !deltaFixed && cc.MetaData.Type == format.Int32 && slices.Contains(cc.MetaData.Encoding, format.DeltaBinaryPacked) {
				return nil, fmt.Errorf("%w: column %q (row group %d) is an INT32 column in the DELTA_BINARY_PACKED encoding, which weir's Parquet decoder (parquet-go) may read wrongly: rewrite the table with PLAIN or dictionary encoding",
					errUnsupported, strings.Join(cc.MetaData.PathInSchema, "."), g)
			}
			if cc.MetaData.Codec == format.Lz4Raw && !lz4Fixed {
				if err := checkLZ4Pages(r, size, g, &cc.MetaData); err != nil {
					return nil, err
				}
			}
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

// lz4MinRatio: parquet-go's own LZ4_RAW codec decodes a page correctly
// only when its page buffer holds lz4MinRatio × the compressed size,
// which a page that compresses at least lz4MinRatio:1 guarantees (see
// lz4RawCodec). When weir's codec could not be installed, checkLZ4Pages
// refuses the other pages before any row is read.
const lz4MinRatio = 3

// checkLZ4Pages reads the page headers of an LZ4_RAW column chunk and
// refuses the table (errUnsupported, naming the column) if a page
// compresses less than lz4MinRatio:1; see lz4MinRatio.
func checkLZ4Pages(r io.ReaderAt, size int64, group int, md *format.ColumnMetaData) error {
	col := strings.Join(md.PathInSchema, ".")
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	if start < 0 || md.TotalCompressedSize < 0 || start+md.TotalCompressedSize > size {
		return fmt.Errorf("%w: column %q (row group %d): its chunk lies outside the file", errMalformed, col, group)
	}
	br := bufio.NewReader(io.NewSectionReader(r, start, md.TotalCompressedSize))
	dec := thrift.NewDecoder((&thrift.CompactProtocol{}).NewReader(br))
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		var h format.PageHeader
		if err := dec.Decode(&h); err != nil {
			return fmt.Errorf("%w: column %q (row group %d): page header: %v", errMalformed, col, group, err)
		}
		compressed, uncompressed := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		switch h.Type {
		case format.DataPageV2:
			if v2, ok := h.DataPageHeaderV2.Get(); ok {
				if c, ok := v2.IsCompressed.Get(); ok && !c {
					compressed = 0 // the default is compressed
				}
				levels := int64(v2.DefinitionLevelsByteLength) + int64(v2.RepetitionLevelsByteLength)
				compressed, uncompressed = max(0, compressed-levels), uncompressed-levels
			}
		case format.DataPage, format.DictionaryPage:
		default:
			compressed = 0 // index pages are not decoded
		}
		if compressed > 0 && lz4MinRatio*compressed > uncompressed {
			return fmt.Errorf("%w: column %q (row group %d) has an LZ4_RAW page of %d bytes that compresses to %d, less than %d:1, which weir's Parquet decoder (parquet-go) may read wrongly: rewrite the table with ZSTD, SNAPPY or no compression",
				errUnsupported, col, group, uncompressed, compressed, lz4MinRatio)
		}
		if _, err := br.Discard(int(h.CompressedPageSize)); err != nil {
			return fmt.Errorf("%w: column %q (row group %d): page of %d bytes: %v", errMalformed, col, group, h.CompressedPageSize, err)
		}
	}
}

func codecName(c format.CompressionCodec) string {
	switch c {
	case format.Lz4:
		return "LZ4 (the deprecated Hadoop-framed codec 5; LZ4_RAW is codec 7)"
	case format.LZO:
		return "LZO"
	}
	return fmt.Sprintf("compression codec %d", int32(c))
}

// nestedKind describes a top-level schema element that is not a flat
// column ("a list", "a map", ...), or returns "" for a non-repeated leaf.
func nestedKind(el *format.SchemaElement) string {
	n, group := el.NumChildren.Get()
	_, leaf := el.Type.Get()
	group = group && n > 0 || !leaf
	ct, hasCT := el.ConvertedType.Get()
	switch el.LogicalType.Value.(type) {
	case *format.ListType:
		return "a list"
	case *format.MapType:
		return "a map"
	case *format.VariantType:
		return "a variant"
	}
	if group {
		if hasCT && ct == deprecated.List {
			return "a list"
		}
		if hasCT && (ct == deprecated.Map || ct == deprecated.MapKeyValue) {
			return "a map"
		}
		return "a struct (a group of fields)"
	}
	if rt, ok := el.RepetitionType.Get(); ok && rt == format.Repeated {
		return "a repeated field (a list)"
	}
	return ""
}

// convertedName is the name the Parquet spec gives converted type ct
// (deprecated.ConvertedType has no String method).
func convertedName(ct deprecated.ConvertedType) string {
	names := [...]string{"UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE", "TIME_MILLIS", "TIME_MICROS",
		"TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8", "UINT_16", "UINT_32", "UINT_64", "INT_8", "INT_16", "INT_32", "INT_64",
		"JSON", "BSON", "INTERVAL"}
	if ct >= 0 && int(ct) < len(names) {
		return "converted type " + names[ct]
	}
	return fmt.Sprintf("converted type %d", int32(ct))
}

// colConvOf is the conversion of a leaf column: by its logical type if it
// has one, else by its converted type, else by its physical type. An
// annotation that is not valid on the physical type is an error.
func colConvOf(el *format.SchemaElement) (colConv, error) {
	phys, _ := el.Type.Get()
	length, _ := el.TypeLength.Get()
	invalid := func(ann any) (colConv, error) {
		if phys == format.FixedLenByteArray {
			return colConv{}, fmt.Errorf("%v is not valid on %s(%d)", ann, phys, length)
		}
		return colConv{}, fmt.Errorf("%v is not valid on %s", ann, phys)
	}
	intConv := func(signed bool, bits int) (colConv, bool) {
		switch {
		case phys == format.Int32 && bits <= 32 && signed:
			return colConv{kind: convInt32}, true
		case phys == format.Int32 && bits <= 32:
			return colConv{kind: convUint32}, true
		case phys == format.Int64 && signed:
			return colConv{kind: convInt64}, true
		case phys == format.Int64:
			return colConv{kind: convUint64}, true
		}
		return colConv{}, false
	}
	decimalConv := func(scale int32) (colConv, bool) {
		switch phys {
		case format.Int32, format.Int64, format.ByteArray, format.FixedLenByteArray:
			return colConv{kind: convDecimal, scale: scale}, scale >= 0
		}
		return colConv{}, false
	}
	// The spec allows STRING, ENUM, JSON and BSON on BYTE_ARRAY only; a
	// FIXED_LEN_BYTE_ARRAY so annotated is read too, as it always was.
	stringish := func(kind valueConv) (colConv, bool) {
		return colConv{kind: kind}, phys == format.ByteArray || phys == format.FixedLenByteArray
	}
	if lt := el.LogicalType.Value; lt != nil {
		var cv colConv
		ok := false
		switch l := lt.(type) {
		case *format.IntType:
			cv, ok = intConv(l.IsSigned, int(l.BitWidth))
		case *format.DecimalType:
			cv, ok = decimalConv(l.Scale)
		case *format.DateType:
			cv, ok = colConv{kind: convInt32}, phys == format.Int32
		case *format.TimeType:
			if _, ms := l.Unit.Value.(*format.MilliSeconds); ms {
				cv, ok = colConv{kind: convInt32}, phys == format.Int32
			} else {
				cv, ok = colConv{kind: convInt64}, phys == format.Int64
			}
		case *format.TimestampType:
			cv, ok = colConv{kind: convInt64}, phys == format.Int64
		case *format.StringType, *format.EnumType, *format.JsonType:
			cv, ok = stringish(convString)
		case *format.BsonType, *format.GeometryType, *format.GeographyType:
			cv, ok = stringish(convBytes)
		case *format.UUIDType:
			cv, ok = colConv{kind: convUUID}, phys == format.FixedLenByteArray && length == 16
		case *format.Float16Type:
			cv, ok = colConv{kind: convFloat16}, phys == format.FixedLenByteArray && length == 2
		case *format.NullType:
			cv, ok = colConv{kind: convNull}, true
		}
		if !ok {
			return invalid("logical type " + lt.String())
		}
		return cv, nil
	}
	if ct, has := el.ConvertedType.Get(); has {
		var cv colConv
		ok := false
		switch ct {
		case deprecated.Int8, deprecated.Int16, deprecated.Int32:
			cv, ok = intConv(true, 32)
		case deprecated.Int64:
			cv, ok = intConv(true, 64)
		case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32:
			cv, ok = intConv(false, 32)
		case deprecated.Uint64:
			cv, ok = intConv(false, 64)
		case deprecated.Decimal:
			scale, _ := el.Scale.Get()
			cv, ok = decimalConv(scale)
		case deprecated.Date, deprecated.TimeMillis:
			cv, ok = colConv{kind: convInt32}, phys == format.Int32
		case deprecated.TimeMicros, deprecated.TimestampMillis, deprecated.TimestampMicros:
			cv, ok = colConv{kind: convInt64}, phys == format.Int64
		case deprecated.UTF8, deprecated.Enum, deprecated.Json:
			cv, ok = stringish(convString)
		case deprecated.Bson:
			cv, ok = stringish(convBytes)
		case deprecated.Interval:
			cv, ok = colConv{kind: convBytes}, phys == format.FixedLenByteArray && length == 12
		}
		if !ok {
			return invalid(convertedName(ct))
		}
		return cv, nil
	}
	switch phys {
	case format.Boolean:
		return colConv{kind: convBool}, nil
	case format.Int32:
		return colConv{kind: convInt32}, nil
	case format.Int64:
		return colConv{kind: convInt64}, nil
	case format.Int96:
		return colConv{kind: convInt96}, nil
	case format.Float:
		return colConv{kind: convFloat}, nil
	case format.Double:
		return colConv{kind: convDouble}, nil
	case format.ByteArray, format.FixedLenByteArray:
		return colConv{kind: convBytes}, nil
	}
	return colConv{}, fmt.Errorf("unknown physical type %v", phys)
}

func (p *parquetReader) Rows() int64 { return p.starts[len(p.starts)-1] }

func (p *parquetReader) SeekRow(row int64) error {
	if row < 0 || row > p.Rows() {
		return fmt.Errorf("row %d is outside the table's %d rows", row, p.Rows())
	}
	p.closeGroup()
	p.rg = sort.Search(len(p.starts)-1, func(i int) bool { return p.starts[i+1] > row })
	p.row = row
	return nil
}

// openGroup opens the columns of row group p.rg at row p.row.
func (p *parquetReader) openGroup() error {
	chunks := p.pf.RowGroups()[p.rg].ColumnChunks()
	if len(chunks) != len(p.names) {
		return fmt.Errorf("%w: row group %d has %d columns, the schema %d", errMalformed, p.rg, len(chunks), len(p.names))
	}
	p.cols = make([]columnReader, len(chunks))
	for i, cc := range chunks {
		p.cols[i].pages = cc.Pages()
		if err := p.cols[i].pages.SeekToRow(p.row - p.starts[p.rg]); err != nil {
			p.closeGroup()
			return fmt.Errorf("%w: row group %d: seek to row %d: %v", errMalformed, p.rg, p.row, err)
		}
	}
	return nil
}

func (p *parquetReader) closeGroup() {
	for i := range p.cols {
		p.cols[i].close()
	}
	p.cols = nil
}

func (p *parquetReader) Next(dst []weir.Row, sizes []int) (int, error) {
	for p.rg < len(p.starts)-1 && p.row >= p.starts[p.rg+1] {
		p.closeGroup()
		p.rg++
	}
	if p.rg >= len(p.starts)-1 || len(dst) == 0 {
		return 0, io.EOF
	}
	if p.cols == nil {
		if err := p.openGroup(); err != nil {
			return 0, err
		}
	}
	n := int(min(int64(len(dst)), p.starts[p.rg+1]-p.row))
	if len(p.vals) != len(p.cols) {
		p.vals = make([][]pq.Value, len(p.cols))
	}
	for c := range p.cols {
		if cap(p.vals[c]) < n {
			p.vals[c] = make([]pq.Value, n)
		}
		k, err := p.cols[c].read(p.vals[c][:n])
		if k < n {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("the column chunk ends after %d of the row group's %d rows", p.row-p.starts[p.rg]+int64(k), p.starts[p.rg+1]-p.starts[p.rg])
			}
			p.closeGroup()
			return 0, fmt.Errorf("%w: row group %d: column %q: %v", errMalformed, p.rg, p.names[c], err)
		}
	}
	for i := 0; i < n; i++ {
		dst[i], sizes[i] = make(weir.Row, len(p.names)), 1
	}
	for c, name := range p.names {
		cv := p.conv[c]
		for i, v := range p.vals[c][:n] {
			if v.IsNull() {
				dst[i][name] = nil
				continue
			}
			x, err := cv.value(v)
			if err != nil {
				p.closeGroup()
				return 0, fmt.Errorf("%w: row %d: column %q: %v", errMalformed, p.row+int64(i), name, err)
			}
			dst[i][name] = x
			sizes[i] += valueWeight(x)
		}
		p.cols[c].release()
	}
	p.row += int64(n)
	return n, nil
}

// value converts a non-null value of the column.
func (cv colConv) value(v pq.Value) (any, error) {
	switch cv.kind {
	case convNull:
		return nil, nil
	case convBool:
		return v.Boolean(), nil
	case convInt32:
		return int64(v.Int32()), nil
	case convUint32:
		return uint64(v.Uint32()), nil
	case convInt64:
		return v.Int64(), nil
	case convUint64:
		return v.Uint64(), nil
	case convInt96:
		return int96Nanos(v.Int96())
	case convFloat:
		return float64(v.Float()), nil
	case convDouble:
		return v.Double(), nil
	case convFloat16:
		b := v.ByteArray()
		if len(b) != 2 {
			return nil, fmt.Errorf("a FLOAT16 value of %d bytes", len(b))
		}
		return float16(binary.LittleEndian.Uint16(b)), nil
	case convString:
		return string(v.ByteArray()), nil
	case convUUID:
		b := v.ByteArray()
		if len(b) != 16 {
			return nil, fmt.Errorf("a UUID value of %d bytes", len(b))
		}
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
	case convDecimal:
		return decimalText(v, cv.scale)
	default:
		return append([]byte(nil), v.ByteArray()...), nil
	}
}

// int96Nanos converts a deprecated INT96 timestamp (nanoseconds of the
// day in the low 8 bytes, the Julian day in the high 4) to nanoseconds
// since the Unix epoch. One that int64 nanoseconds cannot hold (before
// 1677-09-21 or after 2262-04-11) is an error.
func int96Nanos(v deprecated.Int96) (int64, error) {
	const nsPerDay = 86400 * 1_000_000_000
	const julianUnixEpoch = 2440588
	nanos := uint64(v[1])<<32 | uint64(v[0])
	days := int64(v[2]) - julianUnixEpoch
	if nanos >= nsPerDay {
		return 0, fmt.Errorf("INT96 timestamp with %d nanoseconds in its day", nanos)
	}
	if days > -106751 && days < 106751 { // no overflow possible
		return days*nsPerDay + int64(nanos), nil
	}
	ns := new(big.Int).Mul(big.NewInt(days), big.NewInt(nsPerDay))
	ns.Add(ns, new(big.Int).SetUint64(nanos))
	if !ns.IsInt64() {
		return 0, fmt.Errorf("INT96 timestamp (Julian day %d) outside what int64 nanoseconds since 1970 hold (1677-09-21 to 2262-04-11)", v[2])
	}
	return ns.Int64(), nil
}

// float16 widens an IEEE 754 half-precision value to float64 (exact).
func float16(h uint16) float64 {
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	var f float64
	switch exp {
	case 0: // zero or subnormal
		f = math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			f = math.Inf(1)
		} else {
			f = math.NaN()
		}
	default:
		f = math.Ldexp(frac+1024, exp-25)
	}
	if h&0x8000 != 0 {
		f = math.Copysign(f, -1)
	}
	return f
}

// decimalText is the exact decimal text of a DECIMAL value with scale
// scale ("-12.30" for the unscaled -1230 at scale 2): INT32 and INT64
// values are the unscaled number, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY
// values its big-endian two's complement.
func decimalText(v pq.Value, scale int32) (string, error) {
	var neg bool
	var digits string
	switch v.Kind() {
	case pq.Int32:
		neg, digits = signedDigits(int64(v.Int32()))
	case pq.Int64:
		neg, digits = signedDigits(v.Int64())
	default:
		b := v.ByteArray()
		switch {
		case len(b) == 0:
			return "", errors.New("a DECIMAL value of 0 bytes")
		case len(b) <= 8:
			x := int64(int8(b[0])) // sign-extend the first byte
			for _, c := range b[1:] {
				x = x<<8 | int64(c)
			}
			neg, digits = signedDigits(x)
		default:
			x := new(big.Int).SetBytes(b)
			if b[0]&0x80 != 0 {
				x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
			neg, digits = x.Sign() < 0, new(big.Int).Abs(x).String()
		}
	}
	if scale > 0 {
		if pad := int(scale) + 1 - len(digits); pad > 0 {
			digits = strings.Repeat("0", pad) + digits
		}
		digits = digits[:len(digits)-int(scale)] + "." + digits[len(digits)-int(scale):]
	}
	if neg {
		digits = "-" + digits
	}
	return digits, nil
}

func signedDigits(x int64) (neg bool, digits string) {
	if x < 0 {
		return true, strconv.FormatUint(-uint64(x), 10)
	}
	return false, strconv.FormatInt(x, 10)
}

func (p *parquetReader) Close() error {
	p.closeGroup()
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
	// Name is the column's name (required).
	Name string `yson:"name,required"`
	// Type is the column's type (required); every column is optional
	// (nullable). boolean, int64, uint64 (INT64 annotated unsigned),
	// double, string (UTF-8), bytes, or json (any value, as JSON text).
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
func inferColumns(rows rowSource) ([]Column, error) {
	types := map[string]ColumnType{}
	bigUint := map[string]bool{}
	err := rows(func(p *pending) error {
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
				return fmt.Errorf("%w: column %q holds both %s and %s values (message %s); declare its type in columns", errRowRefused, k, prev, t, p.msg.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cols := make([]Column, 0, len(types))
	for k, t := range types {
		if t == "" {
			t = ColString
		}
		if t == ColInt64 && bigUint[k] {
			return nil, fmt.Errorf("%w: column %q holds negative int64 and uint64 values above 2^63-1; declare its type in columns", errRowRefused, k)
		}
		cols = append(cols, Column{Name: k, Type: t})
	}
	sort.Slice(cols, func(i, j int) bool { return cols[i].Name < cols[j].Name })
	return cols, nil
}

// errSchema: a source row does not fit the source's declared columns.
var errSchema = errors.New("the row does not fit the source's columns")

// checkRow checks row against declared columns (SourceParams.Columns):
// only declared columns, each value of its column's type by the sink's
// rule (parquetValue).
func checkRow(cols map[string]ColumnType, row weir.Row) error {
	for k, v := range row {
		t, ok := cols[k]
		if !ok {
			return fmt.Errorf("%w: column %q is not declared", errSchema, k)
		}
		if _, err := parquetValue(t, v); err != nil {
			return fmt.Errorf("%w: column %q (declared %s): %w", errSchema, k, t, err)
		}
	}
	return nil
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
func writeParquet(w io.Writer, cols []Column, codec compress.Codec, rows rowSource, meta map[string]string) error {
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
	err := rows(func(p *pending) error {
		start, present := len(values), 0
		for i, c := range cols {
			raw, ok := p.msg.Payload[c.Name]
			if ok {
				present++
			}
			v, err := parquetValue(c.Type, raw)
			if err != nil {
				return fmt.Errorf("%w: message %s: column %q: %w", errRowRefused, p.msg.ID, c.Name, err)
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
					return fmt.Errorf("%w: message %s: column %q is not declared in columns", errRowRefused, p.msg.ID, k)
				}
			}
		}
		buf = append(buf, pq.Row(values[start:len(values):len(values)]))
		if len(buf) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
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
