package msgid

import (
	"math"
	"math/bits"
	"strconv"
)

// lexMaxLen is the length of the longest serialization: 1 length digit + 16 digits.
const lexMaxLen = 17

const hexDigits = "0123456789abcdef"

// lexDigits returns the number of significant hex digits of v (1 for v = 0).
func lexDigits(v uint64) int {
	if v == 0 {
		return 1
	}
	return (bits.Len64(v) + 3) / 4
}

// LexLen returns len(Lex(v)), for callers that size buffers up front.
func LexLen(v uint64) int { return 1 + lexDigits(v) }

// AppendLex appends Lex(v) to dst and returns the extended buffer. It does not
// allocate when dst has room for LexLen(v) more bytes.
func AppendLex(dst []byte, v uint64) []byte {
	n := lexDigits(v)
	var b [lexMaxLen]byte
	b[0] = hexDigits[n-1]
	for i := n; i >= 1; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return append(dst, b[:n+1]...)
}

// Lex returns the lexicographic serialization of v (Flow's
// LexicographicallySerialize): string order of results equals numeric order
// of arguments.
//
// A uint64 v is written as one hex digit holding n−1, where n is the number of
// significant hex digits of v (n = 1 for v = 0), followed by those n digits in
// lowercase without leading zeros:
//
//	0 → "00"   9 → "09"   16 → "110"   123 → "17b"   2^64−1 → "fffffffffffffffff"
//
// Two properties make it fit for message ids, and the engine relies on both:
//
//   - Order: Lex(a) < Lex(b) (byte-wise string comparison) exactly when a < b.
//     A longer number has a larger length digit, so it sorts after every
//     shorter one; equal lengths compare digit by digit, and '0'…'9' < 'a'…'f'
//     in ASCII.
//   - Prefix-free: no serialization is a proper prefix of another, because the
//     first byte fixes the total length. So a string built by concatenating
//     serializations (with or without separators) compares field by field, and
//     ReadLex can cut a serialization off the front of a longer string.
//
// Only the canonical form is accepted by the parsers (lowercase, no leading
// zero digit), so parsing and serialization are inverse bijections and the
// order property holds for every string a parser accepts, not only for the
// ones this package produced.
func Lex(v uint64) string {
	var b [lexMaxLen]byte
	return string(AppendLex(b[:0], v))
}

// ParseLex is the inverse of Lex. It accepts exactly the strings Lex returns
// and reports anything else (empty, too short or too long, bad length digit,
// uppercase or non-hex digit, leading zero) as a *SyntaxError matching
// ErrSyntax. It never panics.
func ParseLex(s string) (uint64, error) {
	v, rest, err := readLex(s, false)
	if err != nil {
		return 0, &SyntaxError{Func: "ParseLex", Input: s, Msg: err.Error()}
	}
	if rest != "" {
		return 0, &SyntaxError{Func: "ParseLex", Input: s, Msg: "trailing bytes after the number"}
	}
	return v, nil
}

// ReadLex cuts one serialization off the front of s and returns its value and
// the bytes after it (Flow's LexicographicallyRead). Because serializations are
// prefix-free, the cut is unambiguous. Errors are *SyntaxError matching
// ErrSyntax.
func ReadLex(s string) (v uint64, rest string, err error) {
	v, rest, e := readLex(s, false)
	if e != nil {
		return 0, s, &SyntaxError{Func: "ReadLex", Input: s, Msg: e.Error()}
	}
	return v, rest, nil
}

// lexError is a reason without the input; callers wrap it in a SyntaxError.
type lexError string

func (e lexError) Error() string { return string(e) }

// hexVal returns the value of a lowercase hex digit, or -1.
func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// readLex reads one canonical serialization from the front of s. With
// complement set, every digit d of the input stands for 15−d (the digit
// reversal of negative int64 values, see LexInt64).
func readLex(s string, complement bool) (uint64, string, error) {
	if len(s) < 2 {
		return 0, s, lexError("too short")
	}
	// 15−d is d XOR 0xf for a hex digit d.
	var flip int
	if complement {
		flip = 0xf
	}
	l := hexVal(s[0])
	if l < 0 {
		return 0, s, lexError("length digit " + strconv.Quote(s[:1]) + " is not a lowercase hex digit")
	}
	n := (l ^ flip) + 1
	if len(s) < 1+n {
		return 0, s, lexError("too short for the " + strconv.Itoa(n) + " digits its length digit announces")
	}
	var v uint64
	for i := 1; i <= n; i++ {
		d := hexVal(s[i])
		if d < 0 {
			return 0, s, lexError("byte " + strconv.Itoa(i) + " " + strconv.Quote(s[i:i+1]) + " is not a lowercase hex digit")
		}
		v = v<<4 | uint64(d^flip)
	}
	if n > 1 && v>>(4*(n-1)) == 0 {
		return 0, s, lexError("leading zero digit (not canonical)")
	}
	return v, s[1+n:], nil
}

// AppendLexInt64 appends LexInt64(v) to dst and returns the extended buffer.
func AppendLexInt64(dst []byte, v int64) []byte {
	if v >= 0 {
		return AppendLex(dst, uint64(v))
	}
	// uint64(-(v+1))+1 avoids overflowing when v = MinInt64.
	m := uint64(-(v + 1)) + 1
	start := len(dst) + 1
	dst = AppendLex(append(dst, '-'), m)
	for i := start; i < len(dst); i++ {
		dst[i] = hexDigits[15-hexVal(dst[i])]
	}
	return dst
}

// LexInt64 returns the lexicographic serialization of a signed v, as Flow
// serializes i64: string order of results equals numeric order of arguments
// over all of int64.
//
// A non-negative v is written exactly as Lex(uint64(v)), so LexInt64 and Lex
// agree on the values both can represent (Flow serializes its i64 indexes this
// way). A negative v is written as "-" followed by Lex(|v|) with every hex
// digit d replaced by 15−d ('0'↔'f', '1'↔'e', …, '7'↔'8'); |MinInt64| = 2^63
// is representable because the magnitude is a uint64.
//
// Ordering: string order equals numeric order over all of int64.
//   - Negatives before non-negatives: '-' (0x2D) sorts before every hex digit.
//   - Among negatives: replacing each digit by its complement reverses the
//     order of prefix-free strings of hex digits, so a larger magnitude (a
//     smaller number) gives a smaller string.
//   - Among non-negatives: as Lex.
//
// The serialization stays prefix-free, so it can be concatenated like Lex.
func LexInt64(v int64) string {
	var b [1 + lexMaxLen]byte
	return string(AppendLexInt64(b[:0], v))
}

// ParseLexInt64 is the inverse of LexInt64. It accepts exactly the strings
// LexInt64 returns; everything else (including "minus zero" and magnitudes
// beyond the int64 range) is a *SyntaxError matching ErrSyntax.
func ParseLexInt64(s string) (int64, error) {
	fail := func(msg string) (int64, error) {
		return 0, &SyntaxError{Func: "ParseLexInt64", Input: s, Msg: msg}
	}
	if len(s) > 0 && s[0] == '-' {
		m, rest, err := readLex(s[1:], true)
		switch {
		case err != nil:
			return fail(err.Error())
		case rest != "":
			return fail("trailing bytes after the number")
		case m == 0:
			return fail("negative zero")
		case m > 1<<63:
			return fail("magnitude out of int64 range")
		}
		// -(m-1)-1 avoids overflowing when m = 2^63.
		return -int64(m-1) - 1, nil
	}
	u, rest, err := readLex(s, false)
	switch {
	case err != nil:
		return fail(err.Error())
	case rest != "":
		return fail("trailing bytes after the number")
	case u > math.MaxInt64:
		return fail("value out of int64 range")
	}
	return int64(u), nil
}
