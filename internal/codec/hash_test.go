package codec

// These tests prove that Hash64 is frozen (golden values: a failure here
// means every job would be re-partitioned), that its FNV-1a part is the
// standard one, and that it spreads similar keys evenly over partitions by
// both h % n and the top bits, which plain FNV-1a does not.

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"
)

// TestHash64Golden pins Hash64. Never update these values: if this test
// fails, Hash64 changed and partitioning with it.
func TestHash64Golden(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0xefd01f60ba992926},
		{"a", 0x82a2a958a9bece5b},
		{"user-123", 0x63425cfdd44e82f2},
		{"\x00", 0xb9034ad37056f5fb},
		{"the quick brown fox jumps over the lazy dog", 0x5be4157f5061abf3},
	}
	for _, tt := range tests {
		if got := Hash64([]byte(tt.in)); got != tt.want {
			t.Errorf("Hash64(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestFNV1a64MatchesStdlib(t *testing.T) {
	for _, s := range []string{"", "a", "user-123", "\x00\xff", "longer input with several words"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv1a64([]byte(s)), h.Sum64(); got != want {
			t.Errorf("fnv1a64(%q) = %#x, hash/fnv says %#x", s, got, want)
		}
	}
}

// TestHash64Distribution hashes sequential keys (the worst realistic case:
// they differ in a byte or two) into n partitions and checks that each
// partition gets its share within 5 standard deviations.
func TestHash64Distribution(t *testing.T) {
	const keys = 100_000
	for _, n := range []uint64{2, 3, 4, 7, 8, 10, 16, 64, 100} {
		modCounts := make([]int, n)
		topCounts := make([]int, n)
		for i := range keys {
			h := Hash64(fmt.Appendf(nil, "user-%d", i))
			modCounts[h%n]++
			topCounts[(h>>32)*n>>32]++ // multiply-shift range reduction: uses the top bits
		}
		checkEven(t, fmt.Sprintf("h %% %d", n), modCounts, keys)
		checkEven(t, fmt.Sprintf("top bits into %d", n), topCounts, keys)
	}
}

// TestFNVAloneSkewsLowBits documents why Hash64 adds a finalizer: the
// lowest bit of plain FNV-1a is the XOR of the lowest bits of the input
// bytes, so all keys with the same such parity land in the same one of two
// partitions (half of all "user-N" keys, e.g. user-1, user-3, user-5).
// Hash64 spreads exactly those keys evenly.
func TestFNVAloneSkewsLowBits(t *testing.T) {
	const keys = 100_000
	fnvCounts := make([]int, 2)
	hashCounts := make([]int, 2)
	var n int
	for i := range keys {
		k := fmt.Appendf(nil, "user-%d", i)
		var parity byte
		for _, c := range k {
			parity ^= c & 1
		}
		if parity != 0 {
			continue
		}
		n++
		fnvCounts[fnv1a64(k)%2]++
		hashCounts[Hash64(k)%2]++
	}
	if fnvCounts[0] != 0 && fnvCounts[1] != 0 {
		t.Errorf("plain FNV-1a spread same-parity keys over both partitions: %v", fnvCounts)
	}
	checkEven(t, "Hash64 of same-parity keys % 2", hashCounts, n)
}

func checkEven(t *testing.T, what string, counts []int, total int) {
	t.Helper()
	want := float64(total) / float64(len(counts))
	tolerance := 5 * math.Sqrt(want)
	for p, c := range counts {
		if math.Abs(float64(c)-want) > tolerance {
			t.Errorf("%s: partition %d has %d keys, want %.0f ± %.0f", what, p, c, want, tolerance)
		}
	}
}
