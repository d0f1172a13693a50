package codec

// Shared test helpers: a seeded generator of random row values and an
// equality that compares floats by their bits (NaN equals itself, -0 is not
// +0), which is the equality the codec promises to preserve.

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// newRand returns a generator seeded by seed; tests log the seed so a
// failure can be replayed.
func newRand(t testing.TB, seed uint64) *rand.Rand {
	t.Helper()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// edgy strings and bytes: empty, the escape byte, the terminator, 0xff,
// invalid UTF-8, and prefixes of one another.
var sampleStrings = []string{
	"", "a", "ab", "abc", "a\x00", "a\x00b", "\x00", "\x00\x00", "\x00\x01", "\x00\xff",
	"\x01", "\xff", "\xff\xff", "é", "\xc3", "user-123", "line\nbreak", `quote"back\`,
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return sampleStrings[r.IntN(len(sampleStrings))]
	}
	// A small alphabet makes shared prefixes and equal values common.
	const alphabet = "\x00\x01ab\xff"
	b := make([]byte, r.IntN(6))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

var sampleInts = []int64{0, 1, -1, 63, -64, 64, 127, 128, -128, 255, 256, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}

func randInt64(r *rand.Rand) int64 {
	switch r.IntN(3) {
	case 0:
		return sampleInts[r.IntN(len(sampleInts))]
	case 1:
		return r.Int64N(1000) - 500
	}
	return int64(r.Uint64())
}

var sampleUints = []uint64{0, 1, 127, 128, 255, 256, 1<<63 - 1, 1 << 63, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint32}

func randUint64(r *rand.Rand) uint64 {
	switch r.IntN(3) {
	case 0:
		return sampleUints[r.IntN(len(sampleUints))]
	case 1:
		return r.Uint64N(1000)
	}
	return r.Uint64()
}

var sampleFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1e-300, -1e-300, 5e-324, -5e-324,
	math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, 1e21, 1e-7, 123.456}

// randFloat64 never returns NaN; tests of NaN are explicit.
func randFloat64(r *rand.Rand) float64 {
	switch r.IntN(3) {
	case 0:
		return sampleFloats[r.IntN(len(sampleFloats))]
	case 1:
		return float64(r.IntN(20)-10) / 4
	}
	for {
		f := math.Float64frombits(r.Uint64())
		if !math.IsNaN(f) {
			return f
		}
	}
}

// randScalar returns a random value of a random row scalar type.
func randScalar(r *rand.Rand) any {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return randInt64(r)
	case 3:
		return randUint64(r)
	case 4:
		return randFloat64(r)
	case 5:
		return randString(r)
	case 6:
		return []byte(randString(r))
	}
	return math.NaN()
}

// randValue returns a random row value nested at most depth more levels.
func randValue(r *rand.Rand, depth int) any {
	if depth <= 0 || r.IntN(4) != 0 {
		return randScalar(r)
	}
	if r.IntN(2) == 0 {
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randValue(r, depth-1)
		}
		return l
	}
	return randRow(r, depth-1)
}

func randRow(r *rand.Rand, depth int) map[string]any {
	m := make(map[string]any)
	for range r.IntN(6) {
		m[randString(r)] = randValue(r, depth)
	}
	return m
}

// equalValue reports whether a and b are the same row value: same types,
// floats with the same bits, []byte compared by content.
func equalValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	case bool, int64, uint64, string:
		return a == b
	}
	return false // not a decoded row type
}

// mustAppendRow encodes row or fails the test.
func mustAppendRow(t testing.TB, row map[string]any) []byte {
	t.Helper()
	b, err := AppendRow(nil, row)
	if err != nil {
		t.Fatalf("AppendRow(%#v): %v", row, err)
	}
	return b
}
