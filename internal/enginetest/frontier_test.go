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
// channel into the Counter is unordered, but each origin's part of it is
// ordered (transport.Offer.Origin): the Counter keeps a frontier per
// (sender, origin) and still writes no dedup row per message. Breaking the
// frontier (not persisting it, or sharing one frontier among senders or
// among origins) makes this test fail.
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
			if c.extra && originFrontiers(t, h.Store) == 0 {
				t.Errorf("a Swift stage's channel: no frontier of a (sender, origin) sub-channel")
			}
			if rows != 0 || frontiers == 0 {
				t.Errorf("ordered channels: %d dedup rows, %d frontier rows; want no rows, frontiers", rows, frontiers)
			}
		})
	}
}

// originFrontiers counts the Counter's frontier rows of sub-channels (a
// sender's origin: tables.ChannelSender).
func originFrontiers(t *testing.T, st store.Store) int {
	t.Helper()
	fs, err := tables.Frontiers(context.Background(), st, "Counter")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fs {
		if f.Origin != "" {
			n++
		}
	}
	return n
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
