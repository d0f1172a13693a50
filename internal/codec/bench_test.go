package codec

// Benchmarks of the hot paths. The typical row is three columns: a string
// key, an int64 counter and a uint64 timestamp. Run with -benchmem: AppendRow
// and AppendKey must report 0 allocs/op.

import (
	"math"
	"testing"
)

func BenchmarkAppendRow(b *testing.B) {
	row := typicalRow()
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = AppendRow(dst[:0], row); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(dst)))
}

func BenchmarkDecodeRow(b *testing.B) {
	enc := mustAppendRow(b, typicalRow())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeRow(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// wideRow is a heavier row: 12 columns, a nested list and map, bytes.
func wideRow() map[string]any {
	return map[string]any{
		"key": "user-123", "count": int64(42), "ts": uint64(1_700_000_000_123_456_789),
		"score": 0.75, "ok": true, "nil": nil, "payload": []byte("0123456789abcdef"),
		"tags": []any{"a", "b", "c"}, "attrs": map[string]any{"region": "eu", "tier": int64(3)},
		"city": "Amsterdam", "lat": 52.37, "lon": 4.89,
	}
}

func BenchmarkAppendRowWide(b *testing.B) {
	row := wideRow()
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = AppendRow(dst[:0], row)
	}
	b.SetBytes(int64(len(dst)))
}

func BenchmarkDecodeRowWide(b *testing.B) {
	enc := mustAppendRow(b, wideRow())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeRow(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendKey(b *testing.B) {
	dst := make([]byte, 0, 64)
	s, n, f := "user-123", int64(1000), math.Pi
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = AppendKey(dst[:0], s, n, f)
	}
}

func BenchmarkDecodeKey(b *testing.B) {
	k := mustKey(b, "user-123", int64(1000), math.Pi)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeKey(k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHash64(b *testing.B) {
	k := mustKey(b, "user-123", int64(1000))
	b.SetBytes(int64(len(k)))
	var sink uint64
	for b.Loop() {
		sink += Hash64(k)
	}
	_ = sink
}

func BenchmarkAppendRowJSON(b *testing.B) {
	row := typicalRow()
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = AppendRowJSON(dst[:0], row)
	}
	b.SetBytes(int64(len(dst)))
}

func BenchmarkRowFromJSON(b *testing.B) {
	line, _ := AppendRowJSON(nil, typicalRow())
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RowFromJSON(line); err != nil {
			b.Fatal(err)
		}
	}
}
