package engine

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/tables"
)

// TestFrontierRowsOfEarlierLayoutsCollected: the counter runs with 4
// Counter partitions, then (stopped in between: a static change) with 2,
// twice. The second layout's jobs read the first's frontier rows (a
// re-sent message the old layout processed is still dropped); once their
// own frontiers cover those rows — after the second layout's first run —
// the controller deletes them, and only the current layout's ranges are
// left. Each key's counts stay 1..n, once each, across the three runs.
func TestFrontierRowsOfEarlierLayoutsCollected(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	ranges := func() map[tables.FrontierRange]bool {
		t.Helper()
		fs, err := tables.Frontiers(ctx, f.st, "Counter")
		if err != nil {
			t.Fatal(err)
		}
		out := map[tables.FrontierRange]bool{}
		for _, fr := range fs {
			out[fr.Range] = true
		}
		return out
	}
	layout := func(n int) map[tables.FrontierRange]bool {
		out := map[tables.FrontierRange]bool{}
		for i := 0; i < n; i++ {
			lo, hi, toEnd := plan.PartitionRange(i, n)
			out[tables.FrontierRange{Lo: lo, Hi: hi, ToEnd: toEnd}] = true
		}
		return out
	}
	run := func(parts int, seed uint64) {
		t.Helper()
		f.writeKeys(t, 3000, 30, seed)
		p := example(t, "counter")
		p.Computations["Counter"].PartitionCount = parts
		f.run(t, p, nil)
		f.checkExactlyOnce(t)
	}
	keys := func(m map[tables.FrontierRange]bool) []tables.FrontierRange {
		var out []tables.FrontierRange
		for r := range m {
			out = append(out, r)
		}
		slices.SortFunc(out, func(a, b tables.FrontierRange) int { return cmp.Compare(a.Lo, b.Lo) })
		return out
	}

	run(4, 1)
	if got := ranges(); len(got) != 4 || !equalSets(got, layout(4)) {
		t.Fatalf("after the 4-partition run, frontier ranges %v, want the 4 of its layout", keys(got))
	}
	run(2, 2)
	got := ranges()
	for r := range layout(2) {
		if !got[r] {
			t.Fatalf("after the 2-partition run, no frontier of its range %+v: %v", r, keys(got))
		}
	}
	run(2, 3)
	if got := ranges(); !equalSets(got, layout(2)) {
		t.Fatalf("after a second 2-partition run, frontier ranges %v, want only the 2 of the current layout (the 4-partition rows collected)", keys(got))
	}
}

func equalSets[K comparable](a, b map[K]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
