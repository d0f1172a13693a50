package codec

// These tests prove the key contract: bytes.Compare of two encodings is the
// order of the values for every type, of tuples element by element, and of a
// tuple before its extensions; types order by tag; floats are canonical
// (-0 is +0, one NaN above +Inf); keys round-trip, only canonical keys
// decode, and the encoding of version 1 is frozen (golden bytes).

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func mustKey(t testing.TB, vals ...any) []byte {
	t.Helper()
	k, err := AppendKey(nil, vals...)
	if err != nil {
		t.Fatalf("AppendKey(%#v): %v", vals, err)
	}
	return k
}

func TestKeyRoundTrip(t *testing.T) {
	tuples := [][]any{
		{},
		{nil},
		{false, true},
		{int64(0), int64(-1), int64(math.MinInt64), int64(math.MaxInt64)},
		{uint64(0), uint64(math.MaxUint64)},
		{0.0, -1.5, math.Inf(1), math.Inf(-1), math.Float64frombits(canonicalNaN), 5e-324}, // other NaNs: TestKeyFloatCanonical
		{"", "a", "a\x00b", "\x00", "\x00\x01", "\x00\xff", "\xff"},
		{[]byte{}, []byte{0}, []byte("x\x00\x00y")},
		{"user-123", int64(42), uint64(7), nil, []byte("k")},
	}
	for _, vals := range tuples {
		k := mustKey(t, vals...)
		got, err := DecodeKey(k)
		if err != nil {
			t.Fatalf("DecodeKey(%x) of %#v: %v", k, vals, err)
		}
		if !equalValue(vals, got) {
			t.Fatalf("round trip of %#v: got %#v", vals, got)
		}
		if again := mustKey(t, got...); !bytes.Equal(again, k) {
			t.Fatalf("re-encoding %#v: got %x, want %x", got, again, k)
		}
	}
}

// TestKeyNormalisedTypes: int, int32, uint32, float32 encode like int64,
// uint64, float64.
func TestKeyNormalisedTypes(t *testing.T) {
	pairs := [][2]any{
		{int(-3), int64(-3)},
		{int32(7), int64(7)},
		{uint32(9), uint64(9)},
		{float32(0.25), 0.25},
		{float32(math.Copysign(0, -1)), 0.0},
	}
	for _, p := range pairs {
		if a, b := mustKey(t, p[0]), mustKey(t, p[1]); !bytes.Equal(a, b) {
			t.Errorf("%T %v encodes as %x, %T %v as %x", p[0], p[0], a, p[1], p[1], b)
		}
	}
}

// keyGen draws random values of one key type, with the value comparison the
// encoding must agree with.
type keyGen struct {
	name    string
	gen     func(*rand.Rand) any
	compare func(a, b any) int
}

var keyGens = []keyGen{
	{"bool", func(r *rand.Rand) any { return r.IntN(2) == 0 }, func(a, b any) int {
		return cmp.Compare(b2i(a.(bool)), b2i(b.(bool)))
	}},
	{"int64", func(r *rand.Rand) any { return randInt64(r) }, func(a, b any) int { return cmp.Compare(a.(int64), b.(int64)) }},
	{"uint64", func(r *rand.Rand) any { return randUint64(r) }, func(a, b any) int { return cmp.Compare(a.(uint64), b.(uint64)) }},
	// cmp.Compare says -0 == +0, which the key encoding must agree with.
	{"float64", func(r *rand.Rand) any { return randFloat64(r) }, func(a, b any) int { return cmp.Compare(a.(float64), b.(float64)) }},
	{"string", func(r *rand.Rand) any { return randString(r) }, func(a, b any) int { return cmp.Compare(a.(string), b.(string)) }},
	{"bytes", func(r *rand.Rand) any { return []byte(randString(r)) }, func(a, b any) int { return bytes.Compare(a.([]byte), b.([]byte)) }},
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestKeyOrderSameType is the order property for single values: for random
// pairs of one type, bytes.Compare of the encodings equals the comparison of
// the values (equal values, equal keys).
func TestKeyOrderSameType(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	for _, g := range keyGens {
		t.Run(g.name, func(t *testing.T) {
			for range 20000 {
				a, b := g.gen(r), g.gen(r)
				if r.IntN(10) == 0 {
					b = a
				}
				want := g.compare(a, b)
				got := bytes.Compare(mustKey(t, a), mustKey(t, b))
				if got != want {
					t.Fatalf("compare(%#v, %#v) = %d, keys %x and %x compare %d", a, b, want, mustKey(t, a), mustKey(t, b), got)
				}
			}
		})
	}
}

// TestKeyTupleOrder is the order property for tuples: random tuples of
// (string, int64, []byte, float64) prefixes, many sharing leading elements,
// sort by their keys exactly as they sort element by element, with a prefix
// before its extensions; and a prefix's key is a byte prefix of the key of
// every extension, so prefix scans work.
func TestKeyTupleOrder(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	types := []keyGen{keyGens[4], keyGens[1], keyGens[5], keyGens[3]}
	compareTuples := func(a, b []any) int {
		for i := range min(len(a), len(b)) {
			if c := types[i].compare(a[i], b[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a), len(b))
	}
	tuples := make([][]any, 3000)
	for i := range tuples {
		if i > 0 && r.IntN(2) == 0 { // extend or vary a previous tuple
			prev := tuples[r.IntN(i)]
			tu := slices.Clone(prev[:r.IntN(len(prev)+1)])
			for len(tu) < len(types) && r.IntN(3) != 0 {
				tu = append(tu, types[len(tu)].gen(r))
			}
			tuples[i] = tu
			continue
		}
		tu := make([]any, r.IntN(len(types)+1))
		for j := range tu {
			tu[j] = types[j].gen(r)
		}
		tuples[i] = tu
	}
	keys := make([][]byte, len(tuples))
	for i, tu := range tuples {
		keys[i] = mustKey(t, tu...)
	}
	var prefixPairs int
	for range 50000 {
		i, j := r.IntN(len(tuples)), r.IntN(len(tuples))
		want := compareTuples(tuples[i], tuples[j])
		if got := bytes.Compare(keys[i], keys[j]); got != want {
			t.Fatalf("tuples %#v and %#v compare %d, keys %x and %x compare %d", tuples[i], tuples[j], want, keys[i], keys[j], got)
		}
		a, b := tuples[i], tuples[j]
		if len(a) < len(b) && compareTuples(a, b[:len(a)]) == 0 {
			prefixPairs++
			if !bytes.HasPrefix(keys[j], keys[i]) {
				t.Fatalf("%#v is a prefix of %#v but key %x is not a prefix of %x", a, b, keys[i], keys[j])
			}
		}
	}
	t.Logf("%d prefix pairs", prefixPairs)
	if prefixPairs < 1000 {
		t.Fatalf("only %d of the pairs were a tuple and its extension; the generator no longer tests prefixes", prefixPairs)
	}
}

// TestKeyCrossTypeOrder pins the documented order of types: nil < false <
// true < int64 < uint64 < float64 < string < []byte, whatever the values.
func TestKeyCrossTypeOrder(t *testing.T) {
	ordered := []any{nil, false, true, int64(math.MaxInt64), uint64(0), math.Inf(-1), "", []byte{}}
	for i := 1; i < len(ordered); i++ {
		a, b := mustKey(t, ordered[i-1]), mustKey(t, ordered[i])
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("%#v (%x) does not sort before %#v (%x)", ordered[i-1], a, ordered[i], b)
		}
	}
}

// TestKeyFloatCanonical: -0 and +0 give one key, every NaN gives one key,
// which sorts after +Inf.
func TestKeyFloatCanonical(t *testing.T) {
	zero := mustKey(t, 0.0)
	if negZero := mustKey(t, math.Copysign(0, -1)); !bytes.Equal(negZero, zero) {
		t.Errorf("-0 key %x, +0 key %x", negZero, zero)
	}
	nan := mustKey(t, math.NaN())
	for _, bits := range []uint64{0x7ff0000000000001, 0xfff8000000000000, 0x7fffffffffffffff, 0xffffffffffffffff} {
		if k := mustKey(t, math.Float64frombits(bits)); !bytes.Equal(k, nan) {
			t.Errorf("NaN 0x%016x key %x, canonical NaN key %x", bits, k, nan)
		}
	}
	if inf := mustKey(t, math.Inf(1)); bytes.Compare(inf, nan) >= 0 {
		t.Errorf("+Inf key %x does not sort before NaN key %x", inf, nan)
	}
	got, err := DecodeKey(nan)
	if err != nil || len(got) != 1 || !math.IsNaN(got[0].(float64)) {
		t.Errorf("DecodeKey(NaN key) = %#v, %v", got, err)
	}
}

// TestKeyGolden pins the key encoding. If this fails, stored keys no longer
// sort or match: never change it, add a new tag instead.
func TestKeyGolden(t *testing.T) {
	tests := []struct {
		vals []any
		want string
	}{
		{[]any{}, ""},
		{[]any{nil, false, true}, "051011"},
		{[]any{int64(-1), int64(0), int64(1)}, "207fffffffffffffff" + "208000000000000000" + "208000000000000001"},
		{[]any{uint64(1)}, "210000000000000001"},
		{[]any{1.0, -1.0, math.NaN()}, "22bff0000000000000" + "22400fffffffffffff" + "22fff8000000000000"},
		{[]any{"a\x00b", []byte{}}, "3061" + "00ff" + "62" + "0001" + "31" + "0001"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(mustKey(t, tt.vals...)); got != tt.want {
			t.Errorf("AppendKey(%#v)\n got %s\nwant %s", tt.vals, got, tt.want)
		}
	}
}

func TestAppendKeyErrors(t *testing.T) {
	for _, v := range []any{[]any{}, map[string]any{}, uint(1), struct{}{}, new(string)} {
		got, err := AppendKey([]byte("keep"), "ok", v)
		if !errors.Is(err, ErrUnsupportedType) {
			t.Fatalf("AppendKey(%T): err %v, want ErrUnsupportedType", v, err)
		}
		var ut *UnsupportedTypeError
		if !errors.As(err, &ut) || ut.Path != "[1]" || ut.Column != "" {
			t.Errorf("AppendKey(%T): error %#v, want path [1]", v, err)
		}
		if string(got) != "keep" {
			t.Errorf("dst = %q, want it cut back", got)
		}
	}
	_, err := AppendKey(nil, int64(1), uint(2))
	if want := "codec: key element [1]: unsupported type uint"; err == nil || err.Error() != want {
		t.Errorf("message %v, want %q", err, want)
	}
}

func TestDecodeKeyErrors(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		is   error
	}{
		{"bad tag", "00", ErrCorrupt},
		{"bad tag after good", "05" + "ff", ErrCorrupt},
		{"int short", "2000", ErrTruncated},
		{"uint short", "21", ErrTruncated},
		{"float short", "22ffff", ErrTruncated},
		{"negative zero", "227fffffffffffffff", ErrCorrupt},
		{"non-canonical NaN", "22fff0000000000001", ErrCorrupt},
		{"negative NaN", "22 0007ffffffffffff", ErrCorrupt},
		{"string unterminated", "306162", ErrTruncated},
		{"string ends at 0x00", "306100", ErrTruncated},
		{"string bad escape", "30610002", ErrCorrupt},
		{"bytes bad escape", "31000062", ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(stripSpaces(tt.hex))
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeKey(b)
			if !errors.Is(err, tt.is) || got != nil {
				t.Fatalf("DecodeKey(%s) = %#v, %v; want error %v", tt.hex, got, err, tt.is)
			}
			if tt.is == ErrCorrupt && errors.Is(err, ErrTruncated) {
				t.Errorf("%v: want a corruption other than truncation", err)
			}
		})
	}
}

func stripSpaces(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil))
}

// TestAppendKeyAllocs: encoding a typical key into a reused buffer does not
// allocate.
func TestAppendKeyAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	s, n, ts := "user-123", int64(1000), uint64(1_700_000_000_000)
	allocs := testing.AllocsPerRun(100, func() {
		dst, _ = AppendKey(dst[:0], s, n, ts)
	})
	if allocs != 0 {
		t.Errorf("AppendKey: %v allocations, want 0", allocs)
	}
}
