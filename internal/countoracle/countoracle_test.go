package countoracle

import (
	"strings"
	"testing"
)

func TestViolations(t *testing.T) {
	want := map[string]int{"a": 3, "b": 1}
	for _, tc := range []struct {
		name string
		got  map[string][]int64
		bad  string // a substring of the one violation; "" for none
	}{
		{"exact", map[string][]int64{"a": {3, 1, 2}, "b": {1}}, ""},
		{"a count twice", map[string][]int64{"a": {1, 2, 2, 3}, "b": {1}}, "key a"},
		{"a count lost", map[string][]int64{"a": {1, 3}, "b": {1}}, "key a"},
		{"a key lost", map[string][]int64{"a": {1, 2, 3}}, "key b: want counts 1..1"},
		{"a key not in the input", map[string][]int64{"a": {1, 2, 3}, "b": {1}, "c": {1}}, "key c: want counts 1..0"},
	} {
		Sort(tc.got)
		bad := Violations(tc.got, want)
		switch {
		case tc.bad == "" && len(bad) > 0:
			t.Errorf("%s: %v", tc.name, bad)
		case tc.bad != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.bad)):
			t.Errorf("%s: %v, want one violation naming %q", tc.name, bad, tc.bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	long := make([]int64, 20)
	for i := range long {
		long[i] = int64(i + 1)
	}
	if got := Summarize(long); got != "[1 2 3 4 5 6] … [15 16 17 18 19 20] (20 values)" {
		t.Errorf("Summarize = %q", got)
	}
}
