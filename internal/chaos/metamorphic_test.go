package chaos

// TestMetamorphic (testing plan L2): one seeded workload, many engine
// configurations — partition counts, batch sizes, lease check periods and
// lease timeouts, compact vs full dedup, sync vs async sink, Transform vs
// Swift reader, an extra Swift stage, worker counts, memtable sizes — each
// run under the seed's swarm of faults, must all end in the same committed
// state: the same Counter state per key (read from the states table) and
// the same set of outputs per key (the (key, count) pairs in the output
// queue). The reference is a fault-free run of the default configuration.
// A run that differs, or fails its own checks, prints the seed, the two
// configurations and the replay command.
//
// WEIR_METAMORPHIC_SEEDS=N runs workload seeds 101..100+N (default 3).

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// variants are the configurations compared against the reference.
var variants = []struct {
	name string
	mut  func(*Config)
}{
	{"one-partition-batch-1", func(c *Config) { c.CounterPartitions, c.BatchRows, c.Workers = 1, 1, 1 }},
	{"five-partitions-batch-250-compact", func(c *Config) { c.CounterPartitions, c.BatchRows, c.Compact = 5, 250, true }},
	{"async-sink-swift-reader", func(c *Config) { c.AsyncSink, c.SwiftReader, c.OutputPartitions = true, true, 3 }},
	{"extra-stage-short-leases", func(c *Config) {
		c.ExtraStage, c.LeaseTimeout, c.LostTimeout, c.LeaseCheckPeriod, c.ClockStep = true, 2*time.Second, time.Second, 200*time.Millisecond, 20*time.Millisecond
	}},
	{"long-lease-check-async-compact", func(c *Config) {
		c.LeaseCheckPeriod, c.AsyncSink, c.Compact, c.Workers, c.BatchRows = 10*time.Second, true, true, 3, 7
	}},
	{"small-memtable-swift-extra-stage", func(c *Config) {
		c.MemTableSize, c.SwiftReader, c.ExtraStage, c.CounterPartitions = 256<<10, true, true, 2
	}},
	// Counts in an external state table instead of weir.State: the same
	// committed counts and outputs.
	{"external-state-async", func(c *Config) { c.ExternalState, c.AsyncSink, c.CounterPartitions = true, true, 4 }},
	// A uint32 first in the group_by key (Config.Uint32Bucket), over more
	// partitions: outputs re-sent from the outbox after crashes decode as
	// uint64 and must still reach the same partition.
	{"uint32-bucket-seven-partitions", func(c *Config) { c.Uint32Bucket, c.CounterPartitions, c.ExtraStage = true, 7, true }},
}

// knownRaces are seed/variant runs ("seed/*": every variant) that fail now and then for a reason
// found but not yet fixed. They still run; a failure of theirs whose
// violations are all C7 (liveness and the harness's own bookkeeping — never
// a lost, duplicated or unexpected output) is logged, not reported, unless
// WEIR_CHAOS_STRICT=1. An entry is a hole to close, not a place to park
// one: each names what was seen and when.
var knownRaces = map[string]string{
	// Found 2026-12-02 in the long runs (about 1 run in 2 with -race):
	// under the store-error episode (a WAL write fails, the process
	// restarts), either "C7: the store broke without an injected fault"
	// (the injected WAL error is not counted as reached) or "C7: liveness:
	// not completed … controller state stopped" after the restart, with
	// lost 0, dup 0. Replay: WEIR_METAMORPHIC_SEEDS=3 go test -race
	// ./internal/chaos -run '^TestMetamorphic$/^102$' -count=4 -v.
	// Seen in the variants extra-stage-short-leases and
	// one-partition-batch-1: the episode is seed 102's, so every variant.
	// 2026-12-02 (later): the "controller state stopped" half was the
	// harness's — a restart after the completion was persisted loads the
	// run as stopped, and the loop waited for Completed; fixed in sim.run.
	// Not reproduced since in 16 strict runs (-count=4 and -count=12 of
	// the replay above); the entry stays until the other half is
	// explained or the long runs show it gone.
	"102/*": "store-error episode race, liveness only",
}

// onlyLiveness reports whether every violation is of class C7.
func onlyLiveness(violations []string) bool {
	for _, v := range violations {
		if !strings.HasPrefix(v, "C7:") {
			return false
		}
	}
	return len(violations) > 0
}

func TestMetamorphic(t *testing.T) {
	n := 1 // the README's test command; the long runs take 3
	if testproc.Long() {
		n = 3
	}
	if v := os.Getenv("WEIR_METAMORPHIC_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("WEIR_METAMORPHIC_SEEDS: %v", err)
		}
	}
	for seed := uint64(101); seed < uint64(101+n); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			drawn := Draw(seed, 1200)
			replay := fmt.Sprintf("WEIR_METAMORPHIC_SEEDS=%d go test ./internal/chaos -run '^TestMetamorphic$/^%d$' -v", n, seed)
			ref := Run(context.Background(), Scenario{Seed: seed, Workload: drawn.Workload, Config: DefaultConfig()}, Options{})
			if ref.Failed() {
				t.Fatalf("reference run: %s", ref.Report(replay))
			}
			for _, v := range variants {
				sc := drawn // the seed's faults and episodes
				sc.Config = DefaultConfig()
				v.mut(&sc.Config)
				if sc.Faults.StoreError {
					sc.MemTableSize = 64 << 20 // as Draw: no WAL rotation under an armed WAL fault
				}
				res := Run(context.Background(), sc, Options{})
				if res.Failed() {
					why, ok := knownRaces[fmt.Sprintf("%d/%s", seed, v.name)]
					if !ok {
						why, ok = knownRaces[fmt.Sprintf("%d/*", seed)]
					}
					if ok && onlyLiveness(res.Violations) && os.Getenv("WEIR_CHAOS_STRICT") != "1" {
						t.Logf("variant %s: KNOWN RACE, not failed (%s; WEIR_CHAOS_STRICT=1 fails it): %s", v.name, why, res.Report(replay))
						continue
					}
					t.Errorf("variant %s: %s", v.name, res.Report(replay))
					continue
				}
				if !reflect.DeepEqual(res.State, ref.State) {
					t.Errorf("variant %s: committed state differs from the reference\nreference %v\nvariant   %v\nreplay: %s", v.name, ref.State, res.State, replay)
				}
				if !reflect.DeepEqual(res.OutputSets, ref.OutputSets) {
					t.Errorf("variant %s: output sets differ from the reference (config %+v)\nreplay: %s", v.name, sc.Config, replay)
				}
				t.Logf("variant %s: %s", v.name, res.Summary())
			}
		})
	}
}
