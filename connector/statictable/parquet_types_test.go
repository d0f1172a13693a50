package statictable

// Tests of the Parquet value mapping that need no other writer: a codec
// parquet-go cannot decode (the deprecated Hadoop-framed LZ4, LZO) and an
// annotation that is not valid on its physical type are refused, through
// the source, with an error naming the file, the column and the codec or
// annotation; and the conversions at their edges — decimals of every
// physical type and width, FLOAT16 (subnormals, ±0, ±Inf, NaN), INT96
// times at the limits of int64 nanoseconds — give the exact values.

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// storedCodec stores pages uncompressed but labels them with codec c.
type storedCodec struct{ c format.CompressionCodec }

func (s storedCodec) String() string                            { return s.c.String() }
func (s storedCodec) CompressionCodec() format.CompressionCodec { return s.c }
func (s storedCodec) Encode(dst, src []byte) ([]byte, error)    { return append(dst[:0], src...), nil }
func (s storedCodec) Decode(dst, src []byte) ([]byte, error)    { return append(dst[:0], src...), nil }

// writeTable writes one optional column of node with values (nil is
// null) to dir/name.
func writeTable(t *testing.T, dir, name, column string, node pq.Node, values []pq.Value, opts ...pq.WriterOption) string {
	t.Helper()
	var buf bytes.Buffer
	w := pq.NewWriter(&buf, append([]pq.WriterOption{pq.NewSchema("t", pq.Group{column: pq.Optional(node)})}, opts...)...)
	for _, v := range values {
		level := 1
		if v.IsNull() {
			level = 0
		}
		if _, err := w.WriteRows([]pq.Row{{v.Level(0, level, 0)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParquetUnreadableCodec: a table compressed with a codec parquet-go
// cannot decode is an error naming the file, the column and the codec.
func TestParquetUnreadableCodec(t *testing.T) {
	for _, c := range []format.CompressionCodec{format.Lz4, format.LZO} {
		t.Run(c.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := writeTable(t, dir, "2024-01-01.parquet", "n", pq.Int(64), []pq.Value{pq.Int64Value(1)}, pq.Compression(storedCodec{c}))
			_, err := readTables(t, dir, 10)
			for _, want := range []string{path, `column "n"`, "compressed with " + c.String()} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not say %q", err, want)
				}
			}
		})
	}
}

// TestParquetInvalidAnnotation: an annotation its physical type cannot
// carry is an error naming the file, the column and the annotation.
func TestParquetInvalidAnnotation(t *testing.T) {
	dir := t.TempDir()
	path := writeTable(t, dir, "2024-01-01.parquet", "s", pq.Leaf(legacyType{pq.Int32Type, deprecated.UTF8}), []pq.Value{pq.Int32Value(1)})
	_, err := readTables(t, dir, 10)
	for _, want := range []string{path, `column "s"`, "converted type UTF8 is not valid on INT32"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	// More combinations, on the schema element alone.
	for _, tc := range []struct {
		phys   format.Type
		length int32
		lt     format.LogicalTypeValue
		want   string
	}{
		{format.Int64, 0, &format.DateType{}, "logical type DATE is not valid on INT64"},
		{format.Int32, 0, &format.IntType{BitWidth: 64, IsSigned: true}, "logical type INT(64,true) is not valid on INT32"},
		{format.FixedLenByteArray, 8, &format.UUIDType{}, "logical type UUID is not valid on FIXED_LEN_BYTE_ARRAY(8)"},
		{format.ByteArray, 0, &format.Float16Type{}, "logical type FLOAT16 is not valid on BYTE_ARRAY"},
		{format.Int32, 0, &format.StringType{}, "logical type STRING is not valid on INT32"},
		{format.Int32, 0, &format.TimestampType{Unit: format.TimeUnit{Value: &format.MilliSeconds{}}}, "is not valid on INT32"},
		{format.Double, 0, &format.DecimalType{Scale: 1, Precision: 5}, "logical type DECIMAL(5,1) is not valid on DOUBLE"},
		{format.Boolean, 0, &format.ListType{}, "logical type LIST is not valid on BOOLEAN"},
	} {
		el := format.SchemaElement{Name: "c", LogicalType: format.LogicalType{Value: tc.lt}}
		el.Type.Set(tc.phys)
		if tc.length > 0 {
			el.TypeLength.Set(tc.length)
		}
		if _, err := colConvOf(&el); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v on %v: error %v, want %q", tc.lt, tc.phys, err, tc.want)
		}
	}
}

func TestDecimalText(t *testing.T) {
	be := func(b ...byte) pq.Value { return pq.ByteArrayValue(b) }
	big17 := append([]byte{0x80}, make([]byte, 16)...) // -2^135
	for _, tc := range []struct {
		v     pq.Value
		scale int32
		want  string
	}{
		{pq.Int32Value(-1), 2, "-0.01"},
		{pq.Int32Value(0), 2, "0.00"},
		{pq.Int32Value(math.MinInt32), 0, "-2147483648"},
		{pq.Int32Value(12345), 5, "0.12345"},
		{pq.Int32Value(12345), 4, "1.2345"},
		{pq.Int64Value(math.MinInt64), 3, "-9223372036854775.808"},
		{pq.Int64Value(math.MaxInt64), 18, "9.223372036854775807"},
		{pq.Int64Value(5), 20, "0.00000000000000000005"},
		{be(0xff), 1, "-0.1"},
		{be(0x00, 0x80), 0, "128"},
		{be(0x80, 0, 0, 0, 0, 0, 0, 0), 0, "-9223372036854775808"},
		{be(0x00, 0x80, 0, 0, 0, 0, 0, 0, 0), 0, "9223372036854775808"},
		{be(0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 0, "-9223372036854775809"},
		{pq.ByteArrayValue(big17), 0, "-" + new(bigInt).lsh(135)},
		{pq.FixedLenByteArrayValue([]byte{0xfe, 0xd4}), 2, "-3.00"},
	} {
		got, err := decimalText(tc.v, tc.scale)
		if err != nil || got != tc.want {
			t.Errorf("decimalText(%v, %d) = %q, %v; want %q", tc.v, tc.scale, got, err, tc.want)
		}
	}
	if _, err := decimalText(be(), 0); err == nil {
		t.Error("an empty DECIMAL byte array is not an error")
	}
}

// bigInt prints powers of two in decimal for TestDecimalText.
type bigInt struct{}

func (bigInt) lsh(n uint) string {
	d := []byte{1} // little-endian decimal digits
	for ; n > 0; n-- {
		carry := byte(0)
		for i := range d {
			x := d[i]*2 + carry
			d[i], carry = x%10, x/10
		}
		if carry > 0 {
			d = append(d, carry)
		}
	}
	var sb strings.Builder
	for i := len(d) - 1; i >= 0; i-- {
		sb.WriteByte('0' + d[i])
	}
	return sb.String()
}

func TestFloat16(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float64
	}{
		{0x0000, 0}, {0x8000, math.Copysign(0, -1)}, {0x3c00, 1}, {0xc000, -2}, {0x3e00, 1.5},
		{0x7bff, 65504}, {0x0001, math.Ldexp(1, -24)}, {0x03ff, math.Ldexp(1023, -24)}, {0x0400, math.Ldexp(1, -14)},
		{0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	} {
		if got := float16(tc.h); math.Float64bits(got) != math.Float64bits(tc.want) {
			t.Errorf("float16(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	for _, h := range []uint16{0x7e00, 0x7c01, 0xfe00} {
		if got := float16(h); !math.IsNaN(got) {
			t.Errorf("float16(%#04x) = %v, want NaN", h, got)
		}
	}
}

func TestInt96Nanos(t *testing.T) {
	const nsPerDay = 86400 * 1_000_000_000
	i96 := func(days int64, nanos uint64) deprecated.Int96 {
		return deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(days + 2440588)}
	}
	// The limits of int64 nanoseconds, as Julian day + nanoseconds of day.
	minDays, minNanos := int64(math.MinInt64/nsPerDay-1), uint64(math.MinInt64%nsPerDay+nsPerDay)
	maxDays, maxNanos := int64(math.MaxInt64/nsPerDay), uint64(math.MaxInt64%nsPerDay)
	for _, tc := range []struct {
		v    deprecated.Int96
		want int64
		err  bool
	}{
		{i96(0, 0), 0, false},
		{i96(0, 1), 1, false},
		{i96(-1, nsPerDay-1), -1, false},
		{i96(19723, 123), 19723*nsPerDay + 123, false},
		{i96(minDays, minNanos), math.MinInt64, false},
		{i96(minDays, minNanos-1), 0, true},
		{i96(maxDays, maxNanos), math.MaxInt64, false},
		{i96(maxDays, maxNanos+1), 0, true},
		{i96(0, nsPerDay), 0, true},
	} {
		got, err := int96Nanos(tc.v)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("int96Nanos(%v) = %d, %v; want %d (error %v)", tc.v, got, err, tc.want, tc.err)
		}
	}
}

// TestLZ4IncompressiblePages (issue 23 item 1, found with DuckDB's LZ4
// tables): LZ4_RAW pages that compress less than 3:1 — random values —
// in several row groups and pages are read exactly. parquet-go's own
// codec decodes such a page into a buffer its reader drops, so the page
// read as stale bytes (errors, or another page's values); weir installs
// lz4RawCodec in its place.
func TestLZ4IncompressiblePages(t *testing.T) {
	if !lz4Fixed || !deltaFixed {
		t.Fatalf("weir's fixes are not installed in parquet-go's tables (their layout changed?): LZ4_RAW codec %v, DELTA_BINARY_PACKED %v", lz4Fixed, deltaFixed)
	}
	type row struct {
		I int64  `parquet:"i"`
		B []byte `parquet:"b"`
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]row, 3000)
	for i := range rows {
		b := make([]byte, 1+r.IntN(40))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		rows[i] = row{I: int64(r.Uint64()), B: b}
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "2024-01-01.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := pq.NewGenericWriter[row](f, pq.Compression(&pq.Lz4Raw), pq.MaxRowsPerRowGroup(1000), pq.PageBufferSize(4096))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := readTables(t, dir, 700)
	if err != nil {
		t.Fatal(err)
	}
	read := got["2024-01-01.parquet"]
	if len(read) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(read), len(rows))
	}
	bad := 0
	for i, w := range rows {
		if g := read[i]; g["i"] != w.I || !bytes.Equal(g["b"].([]byte), w.B) {
			if bad++; bad <= 3 {
				t.Errorf("row %d: read %v, wrote %+v", i, g, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rows differ", bad, len(rows))
	}
	// Without weir's codec (a parquet-go whose codec table changed), the
	// pages parquet-go may decode wrongly are refused, naming the column.
	b, err := os.ReadFile(filepath.Join(dir, "2024-01-01.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := pq.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	md := &pf.Metadata().RowGroups[0].Columns[0].MetaData
	if err := checkLZ4Pages(bytes.NewReader(b), int64(len(b)), 0, md); !errors.Is(err, errUnsupported) || !strings.Contains(err.Error(), `column "`+md.PathInSchema[0]+`" (row group 0) has an LZ4_RAW page`) {
		t.Errorf("checkLZ4Pages: %v", err)
	}
}
