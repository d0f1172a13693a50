package servicelog

import (
	"reflect"
	"testing"

	"github.com/weir-stream/weir/plan"
)

// TestCursorRoundTrip: a cursor survives encoding, and its offset packs
// (cycle, rows) in increasing order.
func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []cursor{{}, {Cycle: 3, After: []byte{0x21, 0, 1, 2}, Rows: 17, Started: 99, PrevStarted: 42}, {Cycle: 1<<32 - 1, Done: true}} {
		got, err := decodeCursor(c.encode())
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %+v = %+v, %v", c, got, err)
		}
	}
	if a, b := (cursor{Cycle: 1, Rows: 1 << 31}).offset(), (cursor{Cycle: 2}).offset(); a >= b {
		t.Fatalf("offset of a later cycle %d not above %d", b, a)
	}
	if _, err := decodeCursor([]byte{9}); err == nil {
		t.Fatal("an unknown cursor version decoded")
	}
}

// TestHashRangeMatchesPlan: the service log splits the first key column's
// range exactly as the engine splits key hashes.
func TestHashRangeMatchesPlan(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 4096} {
		for _, i := range []int{0, n / 2, n - 1} {
			lo, hi, end := hashRange(i, n)
			plo, phi, pend := plan.PartitionRange(i, n)
			if lo != plo || hi != phi || end != pend {
				t.Fatalf("partition %d of %d: [%d, %d) end=%v, plan says [%d, %d) end=%v", i, n, lo, hi, end, plo, phi, pend)
			}
		}
	}
}
