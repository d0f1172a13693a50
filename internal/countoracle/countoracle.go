// Package countoracle is the exactly-once oracle of the keyed counter, the
// pipeline every guarantee test and the bench's comparators run: a key
// with n inputs must have emitted the counts 1..n, each exactly once.
// It depends on nothing of the engine, so that the oracle of an output
// written by another engine (the bench's Flink row) or read by a foreign
// reader is the same code as the engine's own tests use.
package countoracle

import (
	"fmt"
	"slices"
	"sort"
)

// Sort sorts every key's counts ascending, as Violations expects them.
func Sort(got map[string][]int64) {
	for _, c := range got {
		slices.Sort(c)
	}
}

// Violations returns a description of every key whose counts in got
// (sorted ascending: see Sort) are not exactly 1..want[k], each once —
// keys missing from either side included — sorted.
func Violations(got map[string][]int64, want map[string]int) []string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var bad []string
	for k := range keys {
		n, c := want[k], got[k]
		ok := len(c) == n
		for i := 0; ok && i < n; i++ {
			ok = c[i] == int64(i+1)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("key %s: want counts 1..%d once each, got %s", k, n, Summarize(c)))
		}
	}
	sort.Strings(bad)
	return bad
}

// Summarize shows a key's counts: all of them, or the first and last six
// and how many.
func Summarize(c []int64) string {
	if len(c) <= 12 {
		return fmt.Sprint(c)
	}
	return fmt.Sprintf("%v … %v (%d values)", c[:6], c[len(c)-6:], len(c))
}
