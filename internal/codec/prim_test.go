package codec

// These tests prove the framing primitives: uvarints are the bytes of
// encoding/binary and read back, but only in their minimal form; length
// prefixed strings bound their length by the input; fixed-width big-endian
// integers sort like the numbers. Every reader fails with ErrTruncated on a
// short input and never panics.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

func TestUvarint(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	vals := []uint64{0, 1, 127, 128, 255, 16383, 16384, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for range 1000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for _, v := range vals {
		enc := AppendUvarint([]byte("x"), v)
		if want := binary.AppendUvarint([]byte("x"), v); !bytes.Equal(enc, want) {
			t.Fatalf("AppendUvarint(%d) = %x, want %x", v, enc, want)
		}
		if n := uvarintLen(v); n != len(enc)-1 {
			t.Fatalf("uvarintLen(%d) = %d, want %d", v, n, len(enc)-1)
		}
		got, rest, err := Uvarint(append(enc[1:], 0xee))
		if err != nil || got != v || !bytes.Equal(rest, []byte{0xee}) {
			t.Fatalf("Uvarint(%x) = %d, %x, %v; want %d", enc[1:], got, rest, err, v)
		}
		for i := range len(enc) - 1 {
			if _, _, err := Uvarint(enc[1 : 1+i]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("Uvarint(%x) err %v, want ErrTruncated", enc[1:1+i], err)
			}
		}
	}
}

func TestUvarintRejectsNonCanonical(t *testing.T) {
	for _, b := range [][]byte{
		{0x80, 0x00},       // 0, overlong
		{0x81, 0x80, 0x00}, // 1, overlong
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // 2^64, overflows
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // 11 bytes
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},       // 0 in 10 bytes
	} {
		if v, rest, err := Uvarint(b); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) || v != 0 || rest != nil {
			t.Errorf("Uvarint(%x) = %d, %x, %v; want ErrCorrupt", b, v, rest, err)
		}
	}
}

func TestBytesAndString(t *testing.T) {
	for _, s := range []string{"", "a", string(make([]byte, 200))} {
		enc := AppendBytes([]byte("p"), []byte(s))
		if es := AppendString([]byte("p"), s); !bytes.Equal(enc, es) {
			t.Fatalf("AppendBytes %x != AppendString %x", enc, es)
		}
		enc = append(enc, "rest"...)
		v, rest, err := Bytes(enc[1:])
		if err != nil || string(v) != s || string(rest) != "rest" {
			t.Fatalf("Bytes = %q, %q, %v", v, rest, err)
		}
		if cap(v) != len(v) {
			t.Fatalf("cap(v) = %d, want %d", cap(v), len(v))
		}
		got, rest, err := String(enc[1:])
		if err != nil || got != s || string(rest) != "rest" {
			t.Fatalf("String = %q, %q, %v", got, rest, err)
		}
	}
	for _, b := range [][]byte{
		{},
		{0x05, 'a', 'b'},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // length 2^64-1
	} {
		if _, _, err := Bytes(b); !errors.Is(err, ErrTruncated) {
			t.Errorf("Bytes(%x) err %v, want ErrTruncated", b, err)
		}
		if _, _, err := String(b); !errors.Is(err, ErrTruncated) {
			t.Errorf("String(%x) err %v, want ErrTruncated", b, err)
		}
	}
}

func TestUint64BE(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	for range 1000 {
		a, b := r.Uint64()>>r.IntN(64), r.Uint64()>>r.IntN(64)
		ea, eb := AppendUint64BE(nil, a), AppendUint64BE(nil, b)
		if len(ea) != 8 {
			t.Fatalf("len %d", len(ea))
		}
		if got, want := bytes.Compare(ea, eb), cmpUint(a, b); got != want {
			t.Fatalf("%d vs %d: bytes compare %d, want %d", a, b, got, want)
		}
		v, rest, err := Uint64BE(append(ea, 1))
		if err != nil || v != a || !bytes.Equal(rest, []byte{1}) {
			t.Fatalf("Uint64BE = %d, %x, %v; want %d", v, rest, err, a)
		}
	}
	if _, _, err := Uint64BE(make([]byte, 7)); !errors.Is(err, ErrTruncated) {
		t.Errorf("Uint64BE(7 bytes) err %v, want ErrTruncated", err)
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
