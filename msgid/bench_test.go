package msgid

// Benchmarks of the id constructors on the hot path (one id per message) and
// of Merged (one per batched Swift output group). Run with
//
//	go test -run '^$' -bench . -benchmem ./msgid

import (
	"strconv"
	"testing"
)

var (
	sinkString string
	sinkID     ID
	sinkU64    uint64
	sinkBytes  []byte
)

func BenchmarkLex(b *testing.B) {
	for _, v := range []uint64{7, 123, 1 << 40, 1<<64 - 1} {
		b.Run(strconv.FormatUint(v, 10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkString = Lex(v)
			}
		})
	}
}

func BenchmarkAppendLex(b *testing.B) {
	buf := make([]byte, 0, lexMaxLen)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		buf = AppendLex(buf[:0], i)
	}
	sinkBytes = buf
}

func BenchmarkParseLex(b *testing.B) {
	s := Lex(1862469525896877703)
	b.ReportAllocs()
	for b.Loop() {
		sinkU64, _ = ParseLex(s)
	}
}

func BenchmarkLexInt64(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString = LexInt64(-123456789)
	}
}

func BenchmarkOrdered(b *testing.B) {
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		sinkID = Ordered(1862469525896877703, "hit", i)
	}
}

func BenchmarkAppendOrdered(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		buf = AppendOrdered(buf[:0], 1862469525896877703, "hit", i)
	}
	sinkBytes = buf
}

func BenchmarkOrderedIndexed(b *testing.B) {
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		sinkID = OrderedIndexed(1862469525896877703, "hit", 1<<32+i, i&0xff)
	}
}

func BenchmarkAppendOrderedIndexed(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		buf = AppendOrderedIndexed(buf[:0], 1862469525896877703, "hit", 1<<32+i, i&0xff)
	}
	sinkBytes = buf
}

func BenchmarkInherited(b *testing.B) {
	parent := Ordered(1862469525896877703, "hit", 123)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		sinkID = Inherited(parent, "clicks", i)
	}
}

func BenchmarkAppendInherited(b *testing.B) {
	parent := Ordered(1862469525896877703, "hit", 123)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		buf = AppendInherited(buf[:0], parent, "clicks", i)
	}
	sinkBytes = buf
}

func BenchmarkParseOrdered(b *testing.B) {
	id := OrderedIndexed(1862469525896877703, "hit", 123, 4)
	b.ReportAllocs()
	for b.Loop() {
		sinkU64, _ = id.Seq()
	}
}

func BenchmarkMerged(b *testing.B) {
	for _, n := range []int{2, 16, 256} {
		parents := make([]ID, n)
		for i := range parents {
			parents[n-1-i] = Ordered(uint64(i), "in", uint64(i))
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkID, _ = Merged(parents)
			}
		})
	}
}
