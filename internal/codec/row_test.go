package codec

// These tests prove the row contract: every value type and nesting
// round-trips with its type and bits; accepted Go types are normalised;
// equal rows give byte-identical encodings whatever their maps' insertion
// order; the format of version 1 is frozen (golden bytes); unsupported types
// and cycles are errors naming the column; every malformed input is an error
// of the documented class, never a panic; and the hot paths do not allocate
// more than documented.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRowRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name string
		row  map[string]any
	}{
		{"empty", map[string]any{}},
		{"nil value", map[string]any{"a": nil}},
		{"bools", map[string]any{"f": false, "t": true}},
		{"int64", map[string]any{"zero": int64(0), "neg": int64(-1), "min": int64(math.MinInt64), "max": int64(math.MaxInt64), "small": int64(42), "big": int64(1 << 40)}},
		{"uint64", map[string]any{"zero": uint64(0), "max": uint64(math.MaxUint64), "ts": uint64(1_700_000_000_000_000_000)}},
		{"float64", map[string]any{"zero": 0.0, "negzero": math.Copysign(0, -1), "pi": math.Pi, "inf": math.Inf(1), "-inf": math.Inf(-1), "nan": math.NaN(), "tiny": 5e-324, "nanpayload": math.Float64frombits(0x7ff0000000000abc)}},
		{"strings", map[string]any{"empty": "", "ascii": "user-123", "utf8": "héllo, 世界", "nul": "a\x00b", "invalid utf8": "\xff\xfe"}},
		{"bytes", map[string]any{"empty": []byte{}, "data": []byte{0, 1, 2, 0xff}}},
		{"long string", map[string]any{"s": long}},
		{"empty column name", map[string]any{"": int64(1)}},
		{"list", map[string]any{"l": []any{nil, true, int64(-5), uint64(5), 1.5, "s", []byte("b")}}},
		{"empty list", map[string]any{"l": []any{}}},
		{"map", map[string]any{"m": map[string]any{"b": int64(2), "a": "x"}}},
		{"empty map", map[string]any{"m": map[string]any{}}},
		{"nested", map[string]any{"n": []any{map[string]any{"x": []any{[]any{}, map[string]any{"y": nil}}}, []any{[]any{int64(1)}}}}},
		{"many columns", manyColumns(40)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := mustAppendRow(t, tt.row)
			got, rest, err := DecodeRow(enc)
			if err != nil {
				t.Fatalf("DecodeRow(%x): %v", enc, err)
			}
			if len(rest) != 0 {
				t.Fatalf("rest = %x, want empty", rest)
			}
			if !equalValue(tt.row, got) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tt.row)
			}
			if again := mustAppendRow(t, got); !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, enc)
			}
		})
	}
}

func manyColumns(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strings.Repeat("c", i+1)] = int64(i)
	}
	return m
}

// TestRowRandomRoundTrip round-trips random rows nested up to 4 levels.
func TestRowRandomRoundTrip(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	for range 2000 {
		row := randRow(r, 4)
		enc := mustAppendRow(t, row)
		got, rest, err := DecodeRow(enc)
		if err != nil || len(rest) != 0 || !equalValue(row, got) {
			t.Fatalf("row %#v: got %#v, rest %x, err %v", row, got, rest, err)
		}
	}
}

// TestRowNormalisedTypes: int, int32, uint32 and float32 encode as int64,
// uint64 and float64 (the same bytes) and decode as those.
func TestRowNormalisedTypes(t *testing.T) {
	tests := []struct {
		in, want any
	}{
		{int(-7), int64(-7)},
		{int(math.MaxInt64), int64(math.MaxInt64)},
		{int32(math.MinInt32), int64(math.MinInt32)},
		{uint32(math.MaxUint32), uint64(math.MaxUint32)},
		{float32(0.1), float64(float32(0.1))},
		{float32(math.Inf(-1)), math.Inf(-1)},
		{[]any{int(1), map[string]any{"f": float32(2)}}, []any{int64(1), map[string]any{"f": 2.0}}},
	}
	for _, tt := range tests {
		enc := mustAppendRow(t, map[string]any{"v": tt.in})
		want := mustAppendRow(t, map[string]any{"v": tt.want})
		if !bytes.Equal(enc, want) {
			t.Errorf("%T %v encodes as %x, want %x (as %T)", tt.in, tt.in, enc, want, tt.want)
		}
		got, _, err := DecodeRow(enc)
		if err != nil || !equalValue(got["v"], tt.want) {
			t.Errorf("%T %v decodes as %#v (%v), want %#v", tt.in, tt.in, got["v"], err, tt.want)
		}
	}
}

// TestRowNilContainers: a nil []byte, []any or map encodes as the empty one
// and decodes to a non-nil empty value; the nil interface stays nil.
func TestRowNilContainers(t *testing.T) {
	row := map[string]any{"b": []byte(nil), "l": []any(nil), "m": map[string]any(nil), "n": nil}
	got, _, err := DecodeRow(mustAppendRow(t, row))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := got["b"].([]byte); !ok || b == nil || len(b) != 0 {
		t.Errorf("b = %#v, want []byte{}", got["b"])
	}
	if l, ok := got["l"].([]any); !ok || l == nil || len(l) != 0 {
		t.Errorf("l = %#v, want []any{}", got["l"])
	}
	if m, ok := got["m"].(map[string]any); !ok || m == nil || len(m) != 0 {
		t.Errorf("m = %#v, want map[string]any{}", got["m"])
	}
	if v, ok := got["n"]; !ok || v != nil {
		t.Errorf("n = %#v, %v; want nil, true", v, ok)
	}
	empty, _, err := DecodeRow(mustAppendRow(t, nil))
	if err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("nil row decodes as %#v, %v; want empty non-nil map", empty, err)
	}
}

// TestRowDeterministic: the same row built in different insertion orders
// (and so, for Go maps, different iteration orders) encodes identically,
// also inside nested maps.
func TestRowDeterministic(t *testing.T) {
	names := make([]string, 50)
	for i := range names {
		names[i] = string(rune('a'+i%26)) + strings.Repeat("z", i/26)
	}
	build := func(order []int) map[string]any {
		row := make(map[string]any)
		nested := make(map[string]any)
		for _, i := range order {
			row[names[i]] = int64(i)
			nested[names[i]] = names[i]
		}
		row["nested"] = []any{nested}
		return row
	}
	r := newRand(t, uint64(time.Now().UnixNano()))
	order := r.Perm(len(names))
	want := mustAppendRow(t, build(order))
	for range 20 {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if got := mustAppendRow(t, build(order)); !bytes.Equal(got, want) {
			t.Fatalf("insertion order %v changed the encoding", order)
		}
	}
}

// TestRowGolden pins format version 1. If this test fails, the change breaks
// every stored row: add a new format version instead.
func TestRowGolden(t *testing.T) {
	tests := []struct {
		row  map[string]any
		want string
	}{
		{map[string]any{}, "010100"},
		{map[string]any{"key": "user-123", "count": int64(42), "ts": uint64(1_700_000_000_000_000_000)},
			"01" + "24" + "03" +
				"05636f756e74" + "03" + "54" + // count: int64 42, zigzag 84
				"036b6579" + "06" + "08757365722d313233" + // key: string "user-123"
				"027473" + "04" + "8080a8b1e39fe7cb17"}, // ts: uint64
		{map[string]any{"a": nil, "b": true, "c": false, "d": int64(-1), "e": 1.0, "f": []byte{0xab}, "g": []any{}, "h": map[string]any{"x": nil}},
			"01" + "29" + "08" +
				"016100" + "016202" + "016301" + "01640301" +
				"016505000000000000f03f" + "01660701ab" + "01670800" + "0168090101" + "7800"},
	}
	for _, tt := range tests {
		got := hex.EncodeToString(mustAppendRow(t, tt.row))
		if got != tt.want {
			t.Errorf("AppendRow(%#v)\n got %s\nwant %s", tt.row, got, tt.want)
		}
	}
}

// TestRowLongBody covers body lengths needing 1, 2 and 3 length bytes, the
// case where AppendRow moves the body after writing it, and appending after
// existing bytes in dst.
func TestRowLongBody(t *testing.T) {
	for _, n := range []int{0, 100, 121, 122, 123, 200, 16370, 16380, 16400, 1 << 20} {
		row := map[string]any{"s": strings.Repeat("q", n)}
		prefix := []byte("prefix")
		enc, err := AppendRow(bytes.Clone(prefix), row)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(enc, prefix) {
			t.Fatalf("n=%d: prefix overwritten", n)
		}
		enc = append(enc, "tail"...)
		got, rest, err := DecodeRow(enc[len(prefix):])
		if err != nil || string(rest) != "tail" || !equalValue(row, got) {
			t.Fatalf("n=%d: rest %q, err %v", n, rest, err)
		}
	}
}

// TestDecodeRowConcatenated: rows are self-delimiting, so a buffer of rows
// decodes one after another through rest.
func TestDecodeRowConcatenated(t *testing.T) {
	rows := []map[string]any{{"a": int64(1)}, {}, {"b": strings.Repeat("x", 500)}, {"c": []any{"y"}}}
	var buf []byte
	for _, row := range rows {
		var err error
		if buf, err = AppendRow(buf, row); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range rows {
		got, rest, err := DecodeRow(buf)
		if err != nil || !equalValue(want, got) {
			t.Fatalf("row %d: got %#v, %v", i, got, err)
		}
		buf = rest
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left", len(buf))
	}
}

// TestDecodeRowNoAlias: the decoded row survives the input being reused, and
// appending to a decoded []byte does not touch its neighbour.
func TestDecodeRowNoAlias(t *testing.T) {
	row := map[string]any{"a": []byte("aa"), "b": []byte("bb"), "s": "str", "n": "name"}
	enc := mustAppendRow(t, row)
	got, _, err := DecodeRow(enc)
	if err != nil {
		t.Fatal(err)
	}
	clear(enc)
	if !equalValue(row, got) {
		t.Fatalf("after clearing the input: %#v", got)
	}
	a := got["a"].([]byte)
	_ = append(a, 'X')
	if string(got["b"].([]byte)) != "bb" {
		t.Fatalf("append to a overwrote b: %q", got["b"])
	}
}

func TestAppendRowErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	cyclicList := []any{nil}
	cyclicList[0] = cyclicList
	deep := any(int64(1))
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	tests := []struct {
		name    string
		row     map[string]any
		is      error
		column  string
		path    string
		typ     string
		message string
	}{
		{"uint", map[string]any{"ok": int64(1), "bad": uint(1)}, ErrUnsupportedType, "bad", "", "uint", `codec: column "bad": unsupported type uint`},
		{"time", map[string]any{"t": time.Time{}}, ErrUnsupportedType, "t", "", "time.Time", ""},
		{"pointer", map[string]any{"p": new(int64)}, ErrUnsupportedType, "p", "", "*int64", ""},
		{"typed map", map[string]any{"m": map[string]string{}}, ErrUnsupportedType, "m", "", "map[string]string", ""},
		{"typed slice", map[string]any{"s": []string{"x"}}, ErrUnsupportedType, "s", "", "[]string", ""},
		{"nested", map[string]any{"col": []any{int64(1), map[string]any{"x": []any{struct{}{}}}}}, ErrUnsupportedType, "col", `[1]["x"][0]`, "struct {}",
			`codec: column "col"[1]["x"][0]: unsupported type struct {}`},
		{"cycle", map[string]any{"c": cyclic}, ErrTooDeep, "", "", "", `codec: column "c": codec: nested deeper than MaxDepth`},
		{"cyclic list", map[string]any{"l": cyclicList}, ErrTooDeep, "", "", "", ""},
		{"too deep", map[string]any{"d": deep}, ErrTooDeep, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendRow(dst, tt.row)
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
			if string(got) != "keep" {
				t.Errorf("dst = %q, want it cut back to %q", got, "keep")
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("message %q, want %q", err.Error(), tt.message)
			}
			if tt.is != ErrUnsupportedType {
				return
			}
			var ut *UnsupportedTypeError
			if !errors.As(err, &ut) {
				t.Fatalf("%v is not an *UnsupportedTypeError", err)
			}
			if ut.Column != tt.column || ut.Path != tt.path || ut.Type != tt.typ {
				t.Errorf("got column %q path %q type %q, want %q %q %q", ut.Column, ut.Path, ut.Type, tt.column, tt.path, tt.typ)
			}
		})
	}
	// A valid MaxDepth nesting still encodes.
	ok := any(int64(1))
	for range MaxDepth {
		ok = []any{ok}
	}
	enc := mustAppendRow(t, map[string]any{"d": ok})
	if _, _, err := DecodeRow(enc); err != nil {
		t.Fatalf("MaxDepth nesting does not decode: %v", err)
	}
}

// TestDecodeRowErrors feeds hand-made malformed rows and every truncation of
// valid ones; each must fail with the documented class.
func TestDecodeRowErrors(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		is   error
	}{
		{"empty", "", ErrTruncated},
		{"format 0", "00", ErrUnknownFormat},
		{"format 2", "020100", ErrUnknownFormat},
		{"no length", "01", ErrTruncated},
		{"length past input", "0105" + "00", ErrTruncated},
		{"huge length", "01ffffffffffffffffff01", ErrTruncated},
		{"overlong length", "018000", ErrCorrupt},
		{"empty body", "0100", ErrTruncated},
		{"count past body", "0102" + "05" + "00", ErrTruncated},
		{"huge count", "010a" + "ffffffffffffffff7f" + "00", ErrTruncated},
		{"bytes after columns", "0102" + "00" + "00", ErrCorrupt},
		{"bad tag", "0104" + "01" + "0161" + "0a", ErrCorrupt},
		{"tag 0xff", "0104" + "01" + "0161" + "ff", ErrCorrupt},
		{"names unsorted", "0107" + "02" + "016200" + "016100", ErrCorrupt},
		{"names duplicate", "0107" + "02" + "016100" + "016100", ErrCorrupt},
		{"overlong int", "0106" + "01" + "0161" + "038000", ErrCorrupt},
		{"overflowing uint", "010e" + "01" + "0161" + "04ffffffffffffffffff02", ErrCorrupt},
		{"float short", "010a" + "01" + "0161" + "05" + "0000000000", ErrTruncated},
		{"string past body", "0106" + "01" + "0161" + "0605", ErrTruncated},
		{"list count past body", "0106" + "01" + "0161" + "0809", ErrTruncated},
		{"nested names unsorted", "010b" + "01" + "0161" + "0902" + "016200" + "016100", ErrCorrupt},
		{"nested bad tag", "0106" + "01" + "0161" + "0801" + "42", ErrCorrupt},
		{"too deep", "01" + tooDeepBody(), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			row, rest, err := DecodeRow(b)
			if !errors.Is(err, tt.is) {
				t.Fatalf("DecodeRow(%s) = %#v, %x, %v; want error %v", tt.hex, row, rest, err, tt.is)
			}
			if tt.is == ErrCorrupt && errors.Is(err, ErrTruncated) {
				t.Errorf("%v: want a corruption other than truncation", err)
			}
			if tt.is == ErrUnknownFormat == errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: ErrCorrupt and ErrUnknownFormat must be exclusive", err)
			}
			if row != nil || rest != nil {
				t.Errorf("on error got row %#v rest %x, want nil", row, rest)
			}
		})
	}
}

// tooDeepBody is the hex of a length-prefixed body whose one column nests
// MaxDepth+1 lists.
func tooDeepBody() string {
	body := "01" + "0161" + strings.Repeat("0801", MaxDepth+1) + "00"
	n := len(body) / 2
	return hex.EncodeToString(AppendUvarint(nil, uint64(n))) + body
}

func TestDecodeRowTruncated(t *testing.T) {
	enc := mustAppendRow(t, map[string]any{"k": "v", "l": []any{int64(300), 2.5, map[string]any{"x": []byte("y")}}})
	for i := range len(enc) {
		if _, _, err := DecodeRow(enc[:i]); !errors.Is(err, ErrTruncated) {
			t.Errorf("DecodeRow(first %d of %d bytes) err = %v, want ErrTruncated", i, len(enc), err)
		}
	}
}

// TestAppendRowAllocs: with a reused dst, encoding does not allocate.
func TestAppendRowAllocs(t *testing.T) {
	rows := []map[string]any{
		typicalRow(),
		{"a": []any{int64(1), "x", map[string]any{"n": 1.5}}, "b": []byte("bytes"), "c": nil},
		manyColumns(16),
	}
	for _, row := range rows {
		dst := make([]byte, 0, 4096)
		allocs := testing.AllocsPerRun(100, func() {
			dst, _ = AppendRow(dst[:0], row)
		})
		if allocs != 0 {
			t.Errorf("AppendRow of %d columns: %v allocations, want 0", len(row), allocs)
		}
	}
}

// TestDecodeRowAllocs pins the allocations of decoding the typical row: the
// map, one string arena, and boxing the string and the uint64 (int64(42) is
// below 256 and needs no box). A rise means a regression on the hot path.
func TestDecodeRowAllocs(t *testing.T) {
	enc := mustAppendRow(t, typicalRow())
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := DecodeRow(enc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > maxDecodeAllocs {
		t.Errorf("DecodeRow of the typical row: %v allocations, want at most %d", allocs, maxDecodeAllocs)
	}
}

// maxDecodeAllocs is the allocation budget of DecodeRow(typicalRow()).
const maxDecodeAllocs = 5

func typicalRow() map[string]any {
	return map[string]any{"key": "user-123", "count": int64(42), "ts": uint64(1_700_000_000_123_456_789)}
}
