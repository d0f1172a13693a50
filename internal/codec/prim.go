package codec

import (
	"encoding/binary"
	"fmt"
)

// The framing primitives. Readers take the input and return the value and
// the rest of the input after it, so a caller decodes a frame field by field
// without keeping offsets. Every reader returns an error wrapping ErrCorrupt
// (ErrTruncated when the input ends too early) and never panics; on error
// the value is the zero value and rest is nil.

// maxVarintLen is the longest uvarint of a uint64.
const maxVarintLen = binary.MaxVarintLen64

// AppendUvarint appends v as a minimal unsigned LEB128 varint (1 byte below
// 128, at most 10 bytes), the same bytes as encoding/binary.AppendUvarint.
func AppendUvarint(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// Uvarint reads a uvarint written by AppendUvarint. Unlike
// encoding/binary.Uvarint it rejects overlong encodings (0x80 0x00 for 0):
// each value has one encoding, which keeps every format built on it
// canonical (equal values, equal bytes).
func Uvarint(b []byte) (v uint64, rest []byte, err error) {
	if v, rest, err = takeUvarint(b); err != nil {
		return 0, nil, fmt.Errorf("codec: %w", err)
	}
	return v, rest, nil
}

// takeUvarint is Uvarint for this package's decoders, which add their own
// context to errors.
func takeUvarint(b []byte) (v uint64, rest []byte, err error) {
	v, n := uvarint(b)
	if n <= 0 {
		return 0, nil, uvarintError(n)
	}
	return v, b[n:], nil
}

// uvarint is Uvarint without the error: n > 0 is the length read; n == 0
// means b ended inside the varint; n < 0 means it is overlong or overflows.
// Kept small so that it inlines into the hot decoders.
func uvarint(b []byte) (v uint64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return uvarintSlow(b)
}

func uvarintSlow(b []byte) (v uint64, n int) {
	var s uint
	for i, c := range b {
		if i == maxVarintLen {
			return 0, -1 // more than 10 bytes
		}
		if c < 0x80 {
			if i == maxVarintLen-1 && c > 1 {
				return 0, -1 // overflows 64 bits
			}
			if c == 0 && i > 0 {
				return 0, -1 // overlong: a trailing zero group
			}
			return v | uint64(c)<<s, i + 1
		}
		v |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

func uvarintError(n int) error {
	if n == 0 {
		return fmt.Errorf("uvarint: %w", ErrTruncated)
	}
	return fmt.Errorf("uvarint overlong or over 64 bits: %w", ErrCorrupt)
}

// uvarintLen is len(AppendUvarint(nil, v)).
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendBytes appends v prefixed by its length as a uvarint.
func AppendBytes(dst, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// Bytes reads a length-prefixed byte string written by AppendBytes or
// AppendString. v is a sub-slice of b, not a copy (framing code reads many
// fields and keeps few): copy it before b is reused. Its capacity is cut to
// its length, so appending to v never overwrites rest. The length is checked
// against the input before anything else, so a corrupt length cannot make a
// caller allocate.
func Bytes(b []byte) (v, rest []byte, err error) {
	if v, rest, err = takeBytes(b); err != nil {
		return nil, nil, fmt.Errorf("codec: %w", err)
	}
	return v, rest, nil
}

// takeBytes is Bytes for this package's decoders, like takeUvarint.
func takeBytes(b []byte) (v, rest []byte, err error) {
	n, k := uvarint(b)
	if k <= 0 {
		return nil, nil, uvarintError(k)
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("length %d exceeds the %d bytes left: %w", n, len(b), ErrTruncated)
	}
	return b[:n:n], b[n:], nil
}

// AppendString appends s prefixed by its length as a uvarint; the bytes are
// those of AppendBytes(dst, []byte(s)).
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// String reads a length-prefixed string written by AppendString or
// AppendBytes. s is a copy. Its bytes are not checked for valid UTF-8.
func String(b []byte) (s string, rest []byte, err error) {
	v, rest, err := Bytes(b)
	if err != nil {
		return "", nil, err
	}
	return string(v), rest, nil
}

// AppendUint64BE appends v as 8 bytes, big-endian. Fixed width and
// big-endian make bytes.Compare of two encodings agree with comparing the
// numbers, which is what keys built by concatenation need (epochs, offsets,
// sequence numbers).
func AppendUint64BE(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

// Uint64BE reads 8 bytes written by AppendUint64BE.
func Uint64BE(b []byte) (v uint64, rest []byte, err error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("codec: uint64: need 8 bytes, have %d: %w", len(b), ErrTruncated)
	}
	return binary.BigEndian.Uint64(b), b[8:], nil
}
