package weir

import (
	"encoding/json"
	"math"
	"testing"
)

// TestStateIntegerCodecIsJSON: the integer fast paths of State's codec
// write and read exactly what encoding/json does, so states written before
// (or by the JSON path) read back the same.
func TestStateIntegerCodecIsJSON(t *testing.T) {
	s := NewState[int64]("n")
	for _, v := range []int64{0, 1, -1, 255, 256, math.MaxInt64, math.MinInt64} {
		got, err := s.encode(v)
		want, _ := json.Marshal(v)
		if err != nil || string(got) != string(want) {
			t.Errorf("encode(%d) = %q, %v; json %q", v, got, err, want)
		}
		back, err := s.decode(want)
		if err != nil || back.(int64) != v {
			t.Errorf("decode(%q) = %v, %v", want, back, err)
		}
	}
	// Not an integer: the JSON path reports it.
	if _, err := s.decode([]byte(`"x"`)); err == nil {
		t.Error("decode of a string into int64 did not fail")
	}
	u := NewState[uint64]("u")
	if b, _ := u.encode(uint64(math.MaxUint64)); string(b) != "18446744073709551615" {
		t.Errorf("uint64 encode = %q", b)
	}
	var zero State[int64] // declared without NewState: still works
	if enc, dec := zero.codecs(); enc == nil || dec == nil {
		t.Error("a zero State has no codecs")
	}
	if !isZero(int64(0)) || isZero(int64(3)) || !isZero("") || !isZero(struct{ A int }{}) {
		t.Error("isZero")
	}
}
