package disttest

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// TestSwiftHopAcrossWorkers: the counter pipeline with a Swift hop between
// the Reader and the Counter (a SwiftPassthrough grouped by key, fed by
// every Reader partition) on three workers over PostgreSQL. The hop's
// outputs carry their origin (the Reader partition of their parent) across
// the network, where the Counter deduplicates them by a frontier per
// (hop partition, origin) and keeps no dedup row per message. A worker is
// killed while events stream in: its partitions move, the hop's inputs are
// re-delivered and its outputs re-sent over the wire, and every key's
// counts stay 1..n exactly once.
func TestSwiftHopAcrossWorkers(t *testing.T) {
	url, st, c, _ := distSetup(t)
	ctx := context.Background()
	hopSpec := strings.Replace(distSpec, `"input_stream_ids" = ["words"];`, `"input_stream_ids" = ["hopped"];`, 1)
	hopSpec = strings.Replace(hopSpec, `    "Counter" = {`, `    "Hop" = {
        "computation_class_name" = "SwiftPassthrough";
        "group_by" = ["key"];
        "partition_count" = 3;
        "input_stream_ids" = ["words"];
        "output_stream_ids" = ["hopped"];
    };
    "Counter" = {`, 1)
	hopSpec = strings.Replace(hopSpec, `"streams" = {"words" = {}; "counts" = {}};`, `"streams" = {"words" = {}; "hopped" = {}; "counts" = {}};`, 1)
	if !strings.Contains(hopSpec, `"Hop"`) || !strings.Contains(hopSpec, `"hopped" = {}`) || strings.Count(hopSpec, `["hopped"]`) != 2 {
		t.Fatalf("the spec with a hop was not built:\n%s", hopSpec)
	}
	spec := filepath.Join(t.TempDir(), "hop.yson")
	if err := os.WriteFile(spec, []byte(hopSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := startWorkers(t, url, 3)
	ctl := start(t, "c1", "controller", "--store", url, "--spec", spec, "--id", "c1")
	admin := adminAddr(t, ctl)
	r := rand.New(rand.NewPCG(41, 7))
	if err := c.Write(ctx, r, 1500, 40, 150); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, admin)
	// The worker dies with messages in flight: events keep coming while
	// it is killed.
	wrote := make(chan error, 1)
	go func() { wrote <- c.Write(ctx, r, 3000, 40, 100) }()
	time.Sleep(150 * time.Millisecond)
	ws[1].kill()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	caughtUp(t, admin)
	checkCounts(t, ctx, c)
	rows, origins := counterDedup(t, st)
	if rows != 0 || origins == 0 {
		t.Fatalf("the Counter has %d dedup rows and %d frontiers of (sender, origin) sub-channels; want none and some", rows, origins)
	}
}

// counterDedup counts the Counter's dedup rows (both tables) and its
// frontiers of (sender, origin) sub-channels.
func counterDedup(t *testing.T, st store.Store) (rows, origins int) {
	t.Helper()
	ctx := context.Background()
	p := []byte("Counter\x00")
	for _, tb := range []store.Table{store.InputMessages, store.CompactInputMessages} {
		err := st.Scan(ctx, store.Range{Table: tb, Lo: p, Hi: tables.PrefixEnd(p)}, func(_, _ []byte) bool { rows++; return true })
		if err != nil {
			t.Fatal(err)
		}
	}
	fs, err := tables.Frontiers(ctx, st, "Counter")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Origin != "" {
			origins++
		}
	}
	return rows, origins
}
