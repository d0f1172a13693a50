package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tags of the key encoding. Their numeric order is the order of values of
// different types: nil < false < true < int64 < uint64 < float64 < string <
// []byte. Invariant: never renumber a tag (stored keys would reorder); add
// new ones in the gaps.
const (
	keyNil    byte = 0x05
	keyFalse  byte = 0x10
	keyTrue   byte = 0x11
	keyInt64  byte = 0x20
	keyUint64 byte = 0x21
	keyFloat  byte = 0x22
	keyString byte = 0x30
	keyBytes  byte = 0x31
)

// Within a string or []byte key element, 0x00 is written as 0x00 0xff and
// the element ends with 0x00 0x01. The terminator sorts below every byte of
// content and below an escaped 0x00, so an element sorts before every longer
// element it is a prefix of ("ab" < "ab\x00" < "abc"), and nothing after the
// element (the next element's tag) can influence the comparison.
const (
	keyEscape     byte = 0x00
	keyEscapedNul byte = 0xff
	keyTerminator byte = 0x01
)

// canonicalNaN is the one NaN a key holds (quiet, positive, no payload).
const canonicalNaN = 0x7ff8000000000000

// AppendKey appends the order-preserving encoding of the tuple vals to dst.
// For two tuples a and b of values of the same types, element by element,
// bytes.Compare(AppendKey(nil, a...), AppendKey(nil, b...)) is the order of
// the tuples: compare the first elements, then the second, ...; a tuple
// before every longer tuple it is a prefix of. Encodings are
// self-delimiting, so a key is the concatenation of its elements and any
// key prefix encodes a tuple prefix: range scans over "all keys starting
// with (a, b)" are scans over the prefix AppendKey(nil, a, b).
//
// Each element is a type tag byte and then:
//
//	nil, false, true   nothing (the tag is the value)
//	int64              8 bytes big-endian with the sign bit flipped
//	uint64             8 bytes big-endian
//	float64            8 bytes big-endian of the IEEE-754 bits, sign bit
//	                   flipped for positive numbers, all bits for negative
//	string, []byte     the bytes, 0x00 escaped as 0x00 0xff, then 0x00 0x01
//
// Values of different types order by tag: nil < false < true < int64 <
// uint64 < float64 < string < []byte. In particular int64, uint64 and
// float64 do not interleave numerically: uint64(0) sorts after int64(max).
// Callers that mix numeric types in one key position must normalise first.
//
// int, int32, uint32 and float32 are accepted as in rows (int64, uint64,
// float64). Floats are made canonical so that equal values give equal keys:
// -0 is written as +0, and every NaN as one NaN that sorts after +Inf, as in
// PostgreSQL. Lists, maps and other types are an *UnsupportedTypeError
// naming the element's index. On error dst is returned cut back to its
// original length.
func AppendKey(dst []byte, vals ...any) ([]byte, error) {
	start := len(dst)
	for i, v := range vals {
		switch x := v.(type) {
		case nil:
			dst = append(dst, keyNil)
		case bool:
			if x {
				dst = append(dst, keyTrue)
			} else {
				dst = append(dst, keyFalse)
			}
		case int64:
			dst = appendKeyInt64(dst, x)
		case int:
			dst = appendKeyInt64(dst, int64(x))
		case int32:
			dst = appendKeyInt64(dst, int64(x))
		case uint64:
			dst = binary.BigEndian.AppendUint64(append(dst, keyUint64), x)
		case uint32:
			dst = binary.BigEndian.AppendUint64(append(dst, keyUint64), uint64(x))
		case float64:
			dst = appendKeyFloat(dst, x)
		case float32:
			dst = appendKeyFloat(dst, float64(x))
		case string:
			dst = appendKeyString(append(dst, keyString), x)
		case []byte:
			dst = appendKeyBytes(append(dst, keyBytes), x)
		default:
			err := unsupported(v)
			err.Path, err.key = "["+strconv.Itoa(i)+"]", true
			return dst[:start], err
		}
	}
	return dst, nil
}

func appendKeyInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, keyInt64), uint64(v)^(1<<63))
}

func appendKeyFloat(dst []byte, f float64) []byte {
	var bits uint64
	switch {
	case f != f:
		bits = canonicalNaN
	case f == 0:
		bits = 0 // -0 too
	default:
		bits = math.Float64bits(f)
	}
	return binary.BigEndian.AppendUint64(append(dst, keyFloat), floatKeyBits(bits))
}

// floatKeyBits maps IEEE-754 bits to bits whose unsigned order is the order
// of the floats: positive numbers go above every negative one (flip the sign
// bit), and negative numbers, whose magnitude grows with their bits, are
// reversed (flip all bits).
func floatKeyBits(b uint64) uint64 {
	if b>>63 == 1 {
		return ^b
	}
	return b ^ (1 << 63)
}

// floatFromKeyBits inverts floatKeyBits.
func floatFromKeyBits(k uint64) uint64 {
	if k>>63 == 1 {
		return k ^ (1 << 63)
	}
	return ^k
}

// appendKeyString writes s escaped and terminated.
func appendKeyString(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(append(dst, s[:i]...), keyEscape, keyEscapedNul)
		s = s[i+1:]
	}
	return append(append(dst, s...), keyEscape, keyTerminator)
}

// appendKeyBytes is appendKeyString for a []byte.
func appendKeyBytes(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(append(dst, s[:i]...), keyEscape, keyEscapedNul)
		s = s[i+1:]
	}
	return append(append(dst, s...), keyEscape, keyTerminator)
}

// DecodeKey decodes a whole key written by AppendKey into its elements,
// typed int64, uint64, float64, string, []byte, bool or nil. The result does
// not alias b.
//
// Every input either decodes or returns an error wrapping ErrCorrupt (never
// a panic). Only canonical encodings are accepted (no -0, one NaN, every
// 0x00 in a string escaped), so re-encoding the elements reproduces b: a
// decoded key is the key.
func DecodeKey(b []byte) ([]any, error) {
	vals := make([]any, 0, 4)
	for len(b) > 0 {
		v, rest, err := decodeKeyElem(b)
		if err != nil {
			return nil, fmt.Errorf("codec: key element %d: %w", len(vals), err)
		}
		vals = append(vals, v)
		b = rest
	}
	return vals, nil
}

func decodeKeyElem(b []byte) (any, []byte, error) {
	tag, b := b[0], b[1:]
	switch tag {
	case keyNil:
		return nil, b, nil
	case keyFalse:
		return false, b, nil
	case keyTrue:
		return true, b, nil
	case keyInt64, keyUint64, keyFloat:
		if len(b) < 8 {
			return nil, nil, fmt.Errorf("need 8 bytes, have %d: %w", len(b), ErrTruncated)
		}
		u, b := binary.BigEndian.Uint64(b), b[8:]
		switch tag {
		case keyInt64:
			return int64(u ^ (1 << 63)), b, nil
		case keyUint64:
			return u, b, nil
		}
		bits := floatFromKeyBits(u)
		f := math.Float64frombits(bits)
		if (f != f && bits != canonicalNaN) || bits == 1<<63 {
			return nil, nil, fmt.Errorf("float64 bits 0x%016x not canonical: %w", bits, ErrCorrupt)
		}
		return f, b, nil
	case keyString, keyBytes:
		v, fresh, b, err := decodeKeyString(b)
		if err != nil {
			return nil, nil, err
		}
		if tag == keyString {
			return string(v), b, nil
		}
		if !fresh {
			v = append(make([]byte, 0, len(v)), v...)
		}
		return v, b, nil
	default:
		return nil, nil, fmt.Errorf("tag 0x%02x: %w", tag, ErrCorrupt)
	}
}

// decodeKeyString reads an escaped, terminated string and returns the input
// after the terminator. Without escapes (the common case) v is a sub-slice
// of b; with escapes it is a new slice and fresh is true.
func decodeKeyString(b []byte) (v []byte, fresh bool, rest []byte, err error) {
	var out []byte
	for {
		i := bytes.IndexByte(b, keyEscape)
		if i < 0 || i+1 >= len(b) {
			return nil, false, nil, fmt.Errorf("string: no terminator: %w", ErrTruncated)
		}
		switch b[i+1] {
		case keyTerminator:
			if out == nil {
				return b[:i], false, b[i+2:], nil
			}
			return append(out, b[:i]...), true, b[i+2:], nil
		case keyEscapedNul:
			if out == nil {
				out = make([]byte, 0, len(b))
			}
			out = append(append(out, b[:i]...), 0)
			b = b[i+2:]
		default:
			return nil, false, nil, fmt.Errorf("string: byte 0x%02x after 0x00: %w", b[i+1], ErrCorrupt)
		}
	}
}
