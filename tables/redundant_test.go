package tables

import (
	"slices"
	"testing"

	"github.com/weir-stream/weir/msgid"
)

// TestRedundantFrontiers: after a layout change (4 partitions → 2), a
// frontier row of an old range can go once every new range overlapping it
// has its own frontier, for the same channel, at or above the row's id —
// not before, not for another channel, and never a current range's row.
func TestRedundantFrontiers(t *testing.T) {
	q := uint64(1) << 62
	old := []FrontierRange{{Lo: 0, Hi: q}, {Lo: q, Hi: 2 * q}, {Lo: 2 * q, Hi: 3 * q}, {Lo: 3 * q, ToEnd: true}}
	cur := []FrontierRange{{Lo: 0, Hi: 2 * q}, {Lo: 2 * q, ToEnd: true}}
	f := func(r FrontierRange, sender, id string) Frontier {
		return Frontier{Stream: "words", Sender: sender, Range: r, ID: msgid.ID(id)}
	}
	fs := []Frontier{
		f(old[0], "R/0", "10"), // under cur[0]'s own 20: redundant
		f(old[1], "R/0", "30"), // above cur[0]'s own 20: kept
		f(old[2], "R/0", "10"), // cur[1] has no own row for R/0: kept
		f(old[3], "R/1", "05"), // cur[1]'s own R/1 row is 05: redundant (equal)
		f(old[0], "R/1", "07"), // cur[0] has no own row for R/1: kept
		f(cur[0], "R/0", "20"),
		f(cur[1], "R/1", "05"),
		{Stream: "words", Sender: "R/0", Origin: "S/3", Range: old[0], ID: "01"}, // another channel (an origin): kept
		f(FrontierRange{Lo: q / 2, Hi: q + q/2}, "R/0", "15"),                    // straddling two old ranges, inside cur[0]: redundant
		f(FrontierRange{Lo: q, Hi: 3 * q}, "R/1", "01"),                          // overlaps cur[0] (no own R/1): kept
	}
	got := RedundantFrontiers(fs, cur)
	want := []Frontier{fs[0], fs[3], fs[8]}
	if !slices.Equal(got, want) {
		t.Fatalf("redundant:\n got %+v\nwant %+v", got, want)
	}
	// The current layout's own rows are never redundant, whatever the ids.
	if got := RedundantFrontiers([]Frontier{f(cur[0], "R/0", "99")}, cur); len(got) != 0 {
		t.Fatalf("a current range's row found redundant: %+v", got)
	}
	if !(FrontierRange{Lo: 3 * q, ToEnd: true}).Overlaps(FrontierRange{Lo: 2 * q, ToEnd: true}) ||
		(FrontierRange{Lo: 0, Hi: q}).Overlaps(FrontierRange{Lo: q, Hi: 2 * q}) {
		t.Fatal("Overlaps")
	}
}
