package codec

// Fuzz tests: arbitrary bytes never make a decoder panic or allocate beyond
// the input, every error is of the documented class, and whatever decodes is
// canonical: re-encoding it reproduces exactly the bytes consumed. Run e.g.
//
//	go test -run '^$' -fuzz FuzzDecodeRow -fuzztime 10s ./internal/codec

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func FuzzDecodeRow(f *testing.F) {
	for _, row := range []map[string]any{
		{},
		typicalRow(),
		{"a": nil, "b": true, "c": false, "d": int64(-1), "e": 1.5, "f": []byte{0}, "g": "s"},
		{"l": []any{int64(1), []any{map[string]any{"x": uint64(math.MaxUint64)}}}, "m": map[string]any{"": math.NaN()}},
	} {
		enc, err := AppendRow(nil, row)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
		f.Add(append(enc, enc...))
	}
	f.Add([]byte{})
	f.Add([]byte{0x01, 0x80})
	f.Add([]byte{0x01, 0x05, 0x01, 0x00, 0x08, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		row, rest, err := DecodeRow(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownFormat) {
				t.Fatalf("error of no documented class: %v", err)
			}
			if row != nil || rest != nil {
				t.Fatalf("error %v with row %#v rest %x", err, row, rest)
			}
			return
		}
		if len(rest) > len(b) || !bytes.Equal(rest, b[len(b)-len(rest):]) {
			t.Fatalf("rest %x is not a suffix of the input %x", rest, b)
		}
		consumed := b[:len(b)-len(rest)]
		enc, err := AppendRow(nil, row)
		if err != nil {
			t.Fatalf("decoded row %#v does not encode: %v", row, err)
		}
		if !bytes.Equal(enc, consumed) {
			t.Fatalf("re-encoding differs:\n read %x\n  got %x", consumed, enc)
		}
		again, _, err := DecodeRow(enc)
		if err != nil || !equalValue(row, again) {
			t.Fatalf("decode of re-encoding: %#v, %v; want %#v", again, err, row)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	for _, vals := range [][]any{
		{},
		{"user-123", int64(42), uint64(7)},
		{nil, false, true, -1.5, math.Inf(1), math.NaN(), "a\x00b", []byte{0, 0xff}},
	} {
		k, err := AppendKey(nil, vals...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k)
	}
	f.Add([]byte{keyString, 0x00})
	f.Add([]byte{keyFloat, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := DecodeKey(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || vals != nil {
				t.Fatalf("DecodeKey: %#v, %v", vals, err)
			}
			return
		}
		k, err := AppendKey(nil, vals...)
		if err != nil {
			t.Fatalf("decoded key %#v does not encode: %v", vals, err)
		}
		if !bytes.Equal(k, b) {
			t.Fatalf("re-encoding differs:\n read %x\n  got %x", b, k)
		}
	})
}

// FuzzRowFromJSON: arbitrary input never panics; an accepted object encodes
// as a row and survives a JSON round trip.
func FuzzRowFromJSON(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1.5,"x",{"c":null}],"d":18446744073709551615}`))
	f.Add([]byte(`{"s":"\u00e9\ud800","n":-0,"f":1e3,"g":-9223372036854775809}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, line []byte) {
		row, err := RowFromJSON(line)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("error of no documented class: %v", err)
			}
			return
		}
		if _, err := AppendRow(nil, row); err != nil {
			t.Fatalf("row from %s does not encode: %v", line, err)
		}
		out, err := AppendRowJSON(nil, row)
		if err != nil {
			t.Fatalf("row from %s has no JSON: %v", line, err)
		}
		again, err := RowFromJSON(out)
		if err != nil || !equalValue(row, again) {
			t.Fatalf("JSON round trip of %s via %s: %#v, %v; want %#v", line, out, again, err, row)
		}
	})
}
