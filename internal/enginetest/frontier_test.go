package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// countTable counts the rows of a table under prefix.
func countTable(t *testing.T, st store.Store, table store.Table, prefix []byte) int {
	t.Helper()
	n := 0
	r := store.Range{Table: table}
	if prefix != nil {
		r.Lo, r.Hi = prefix, tables.PrefixEnd(prefix)
	}
	if err := st.Scan(context.Background(), r, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFrontierDedupUnderCrashes: the Counter's inputs come over ordered
// channels (a Transform or a Swift source Reader), so it deduplicates them
// by frontier alone: across crashes at every point, of Counter and Reader
// jobs, it drops re-sent inputs (Duplicates > 0), writes no dedup row per
// message, and every count is exact. With an extra SwiftMap stage the
// channel into the Counter is unordered and dedup rows are written instead.
// Breaking the frontier (not persisting it, or sharing one frontier among
// senders) makes this test fail.
func TestFrontierDedupUnderCrashes(t *testing.T) {
	for _, c := range []struct {
		swift, extra bool
	}{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("swift=%v/extra=%v", c.swift, c.extra), func(t *testing.T) {
			ctx := context.Background()
			crashes := NewCrashes(77, 0.1, 40, AllCrashPoints...)
			h := New(t, Options{Seed: 11, SwiftReader: c.swift, ExtraStage: c.extra, Messages: 900, Hooks: crashes})
			if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			h.RequireExactlyOnce(ctx)
			dups := h.Board.Counters()["Counter"].Duplicates
			rows := countTable(t, h.Store, store.InputMessages, []byte("Counter\x00")) + countTable(t, h.Store, store.CompactInputMessages, []byte("Counter\x00"))
			frontiers := countTable(t, h.Store, store.FlowState, tables.FrontierPrefix("Counter"))
			t.Logf("crashes %v; Counter duplicates dropped %d, dedup rows %d, frontier rows %d", crashes.Injected, dups, rows, frontiers)
			if crashes.Total() == 0 || dups == 0 {
				t.Fatalf("no crash (%d) or no duplicate (%d): the test proves nothing", crashes.Total(), dups)
			}
			if c.extra {
				// (Its dedup rows were collected below the final watermark.)
				if frontiers != 0 {
					t.Errorf("unordered channel: %d frontier rows, want none", frontiers)
				}
				return
			}
			if rows != 0 || frontiers == 0 {
				t.Errorf("ordered channels: %d dedup rows, %d frontier rows; want no rows, frontiers", rows, frontiers)
			}
		})
	}
}

// TestFrontierZombies: a Counter job (or the Reader job sending to it)
// frozen before its commit, replaced, then resumed: its commit — with the
// frontier it moved — is refused, the replacement processes those inputs,
// and the counts stay exact with no dedup row per message. Accepting the
// zombie's commit (the chaos harness's accept-zombies sabotage) breaks it.
func TestFrontierZombies(t *testing.T) {
	for _, p := range []transport.PartitionID{"Counter/0", "Reader@p1"} {
		t.Run(string(p), func(t *testing.T) {
			h := zombieRun(t, p, false, Options{})
			rows := countTable(t, h.Store, store.InputMessages, []byte("Counter\x00"))
			frontiers := countTable(t, h.Store, store.FlowState, tables.FrontierPrefix("Counter"))
			if rows != 0 || frontiers == 0 {
				t.Errorf("%d dedup rows, %d frontier rows; want no rows, frontiers", rows, frontiers)
			}
		})
	}
}
