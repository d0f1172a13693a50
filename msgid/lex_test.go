package msgid

// Tests of the lexicographic number serialization. They prove the two
// properties ids are built on: string order equals numeric order (for uint64
// and int64), and serializations are prefix-free, canonical and invertible,
// with the parsers rejecting every non-canonical input without panicking.

import (
	"cmp"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestLexTable(t *testing.T) {
	tests := []struct {
		v    uint64
		want string
	}{
		{0, "00"},
		{1, "01"},
		{9, "09"},
		{10, "0a"},
		{15, "0f"},
		{16, "110"},
		{123, "17b"}, // Flow's example
		{255, "1ff"},
		{256, "2100"},
		{0xffff_ffff, "7ffffffff"},
		{1 << 32, "8100000000"},
		{1862469525896877703, "f19d8d22a8012d687"},
		{1 << 63, "f8000000000000000"},
		{math.MaxUint64, "fffffffffffffffff"},
	}
	for _, tt := range tests {
		if got := Lex(tt.v); got != tt.want {
			t.Errorf("Lex(%d) = %q, want %q", tt.v, got, tt.want)
		}
		if got := string(AppendLex([]byte("x"), tt.v)); got != "x"+tt.want {
			t.Errorf("AppendLex(\"x\", %d) = %q, want %q", tt.v, got, "x"+tt.want)
		}
		if got := LexLen(tt.v); got != len(tt.want) {
			t.Errorf("LexLen(%d) = %d, want %d", tt.v, got, len(tt.want))
		}
		got, err := ParseLex(tt.want)
		if err != nil || got != tt.v {
			t.Errorf("ParseLex(%q) = %d, %v; want %d, nil", tt.want, got, err, tt.v)
		}
	}
}

func TestParseLexRejects(t *testing.T) {
	bad := []string{
		"",
		"0",                  // no digits
		"1",                  // no digits
		"10",                 // announces 2 digits, has 1
		"000",                // trailing byte
		"100",                // leading zero: 0 is "00"
		"2017",               // leading zero
		"0A",                 // uppercase
		"1FF",                // uppercase
		"0g",                 // not hex
		"g0",                 // bad length digit
		"-01",                // sign is for ParseLexInt64 only
		" 00",                // leading space
		"00 ",                // trailing space
		"17b:00",             // trailing bytes
		"fffffffffffffffff0", // too long
		"ffffffffffffffff",   // 16 digits announced, 15 given
		"\xff\xfe",           // not ASCII
		"f0fffffffffffffff",  // leading zero at full width
		"0\x00",              // NUL digit
		strings.Repeat("f", 1000),
	}
	for _, s := range bad {
		v, err := ParseLex(s)
		if err == nil {
			t.Errorf("ParseLex(%q) = %d, nil; want an error", s, v)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseLex(%q) error %v does not match ErrSyntax", s, err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Input != s || se.Func != "ParseLex" {
			t.Errorf("ParseLex(%q) error %#v is not a *SyntaxError naming the input", s, err)
		}
	}
}

// TestReadLexConcatenation shows prefix-freeness at work: a concatenation of
// serializations splits back into its values with no separator.
func TestReadLexConcatenation(t *testing.T) {
	vals := []uint64{0, 123, math.MaxUint64, 16, 1, 1 << 40}
	var b []byte
	for _, v := range vals {
		b = AppendLex(b, v)
	}
	rest := string(b)
	for i, want := range vals {
		got, r, err := ReadLex(rest)
		if err != nil || got != want {
			t.Fatalf("value %d: ReadLex(%q) = %d, %v; want %d", i, rest, got, err, want)
		}
		rest = r
	}
	if rest != "" {
		t.Fatalf("rest = %q, want empty", rest)
	}
	if _, r, err := ReadLex("1f"); err == nil || r != "1f" || !errors.Is(err, ErrSyntax) {
		t.Fatalf("ReadLex(\"1f\") = _, %q, %v; want the input back and ErrSyntax", r, err)
	}
}

func TestLexInt64Table(t *testing.T) {
	tests := []struct {
		v    int64
		want string
	}{
		{math.MinInt64, "-07fffffffffffffff"},
		{math.MinInt64 + 1, "-08000000000000000"},
		{-256, "-deff"},
		{-255, "-e00"},
		{-17, "-eee"},
		{-16, "-eef"},
		{-15, "-f0"},
		{-1, "-fe"},
		{0, "00"},
		{1, "01"},
		{123, "17b"},
		{math.MaxInt64, "f7fffffffffffffff"},
	}
	for i, tt := range tests {
		if got := LexInt64(tt.v); got != tt.want {
			t.Errorf("LexInt64(%d) = %q, want %q", tt.v, got, tt.want)
		}
		if tt.v >= 0 && tt.want != Lex(uint64(tt.v)) {
			t.Errorf("LexInt64(%d) differs from Lex for a non-negative value", tt.v)
		}
		got, err := ParseLexInt64(tt.want)
		if err != nil || got != tt.v {
			t.Errorf("ParseLexInt64(%q) = %d, %v; want %d, nil", tt.want, got, err, tt.v)
		}
		// The table is sorted by value, so the strings must be sorted too.
		if i > 0 && tests[i-1].want >= tt.want {
			t.Errorf("LexInt64(%d) = %q does not sort after LexInt64(%d) = %q",
				tt.v, tt.want, tests[i-1].v, tests[i-1].want)
		}
	}
}

func TestParseLexInt64Rejects(t *testing.T) {
	bad := []string{
		"",
		"-",
		"-f",
		"-ff",                // minus zero ("-" + complement of "00")
		"-efe",               // complement of "101": leading zero
		"-07ffffffffffffff7", // -(2^63+8): out of range
		"-0ffffffffffffffff", // complement of "f0000000000000000": leading zero
		"f8000000000000000",  // 2^63: out of range
		"fffffffffffffffff",  // max uint64: out of range
		"--fe",
		"-FE",
		"-fe:",
		"17b ",
	}
	for _, s := range bad {
		v, err := ParseLexInt64(s)
		if err == nil {
			t.Errorf("ParseLexInt64(%q) = %d, nil; want an error", s, v)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseLexInt64(%q) error %v does not match ErrSyntax", s, err)
		}
	}
}

// FuzzLexOrder checks, for any a and b, that string order of Lex(a), Lex(b)
// equals numeric order of a, b; that both round-trip through ParseLex; and
// that their concatenation splits back with ReadLex (prefix-freeness).
func FuzzLexOrder(f *testing.F) {
	seeds := [][2]uint64{
		{0, 0}, {0, 1}, {15, 16}, {123, 124}, {255, 256},
		{math.MaxUint64, math.MaxUint64 - 1}, {1 << 63, 1<<63 - 1}, {0xf, 0xf0},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		la, lb := Lex(a), Lex(b)
		if got, want := strings.Compare(la, lb), cmp.Compare(a, b); got != want {
			t.Fatalf("Compare(Lex(%d)=%q, Lex(%d)=%q) = %d, numeric order %d", a, la, b, lb, got, want)
		}
		for _, c := range []struct {
			v uint64
			s string
		}{{a, la}, {b, lb}} {
			if got, err := ParseLex(c.s); err != nil || got != c.v {
				t.Fatalf("ParseLex(%q) = %d, %v; want %d", c.s, got, err, c.v)
			}
		}
		v1, rest, err := ReadLex(la + lb)
		if err != nil || v1 != a {
			t.Fatalf("ReadLex(%q) = %d, %v; want %d", la+lb, v1, err, a)
		}
		if v2, err := ParseLex(rest); err != nil || v2 != b {
			t.Fatalf("rest %q parses to %d, %v; want %d", rest, v2, err, b)
		}
	})
}

// FuzzLexInt64Order is FuzzLexOrder for the signed serialization: order must
// hold across negatives and non-negatives alike.
func FuzzLexInt64Order(f *testing.F) {
	seeds := [][2]int64{
		{0, -1}, {-1, 1}, {math.MinInt64, math.MaxInt64}, {math.MinInt64, math.MinInt64 + 1},
		{-15, -16}, {-255, -256}, {-1 << 32, 1 << 32},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		la, lb := LexInt64(a), LexInt64(b)
		if got, want := strings.Compare(la, lb), cmp.Compare(a, b); got != want {
			t.Fatalf("Compare(LexInt64(%d)=%q, LexInt64(%d)=%q) = %d, numeric order %d", a, la, b, lb, got, want)
		}
		if got, err := ParseLexInt64(la); err != nil || got != a {
			t.Fatalf("ParseLexInt64(%q) = %d, %v; want %d", la, got, err, a)
		}
		if a >= 0 && la != Lex(uint64(a)) {
			t.Fatalf("LexInt64(%d) = %q, Lex = %q", a, la, Lex(uint64(a)))
		}
	})
}

// FuzzParseLex feeds arbitrary bytes to the parsers. They must not panic, and
// whatever they accept must be canonical: serializing the value gives back
// exactly the input. Canonicity is what extends the order guarantee from
// strings we produced to every string a parser accepts.
func FuzzParseLex(f *testing.F) {
	for _, s := range []string{"", "00", "17b", "100", "0A", "fffffffffffffffff", "-fe", "-ff", "f0", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseLex(s); err == nil {
			if Lex(v) != s {
				t.Fatalf("ParseLex(%q) = %d, but Lex(%d) = %q", s, v, v, Lex(v))
			}
		} else if !errors.Is(err, ErrSyntax) {
			t.Fatalf("ParseLex(%q): error %v does not match ErrSyntax", s, err)
		}
		if v, rest, err := ReadLex(s); err == nil {
			if Lex(v)+rest != s {
				t.Fatalf("ReadLex(%q) = %d, %q: does not rebuild the input", s, v, rest)
			}
		} else if rest != s {
			t.Fatalf("ReadLex(%q) failed but consumed input (rest %q)", s, rest)
		}
		if v, err := ParseLexInt64(s); err == nil {
			if LexInt64(v) != s {
				t.Fatalf("ParseLexInt64(%q) = %d, but LexInt64(%d) = %q", s, v, v, LexInt64(v))
			}
		} else if !errors.Is(err, ErrSyntax) {
			t.Fatalf("ParseLexInt64(%q): error %v does not match ErrSyntax", s, err)
		}
	})
}
