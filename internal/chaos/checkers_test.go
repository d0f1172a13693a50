package chaos

// TestCheckersCatchSabotage proves the checkers can fail: a checker that
// never fires proves nothing. Each case breaks one guarantee on purpose —
// a store that accepts a zombie's commit, an engine whose epoch commits
// lose Counter's state, an output row duplicated or deleted behind the
// engine's back — and requires the matching checkers to report it.

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-stream/weir/job"
)

func TestCheckersCatchSabotage(t *testing.T) {
	base := func(seed uint64) Scenario {
		sc := Scenario{Seed: seed, Workload: Workload{Messages: 1500, Keys: 12, SourcePartitions: 2}, Config: DefaultConfig()}
		return sc
	}
	cases := []struct {
		name     string
		sabotage sabotage
		scenario func() Scenario
		want     []string // violation classes that must appear
	}{
		{"accept-zombies", sabotageAcceptZombies, func() Scenario {
			sc := base(31)
			sc.Faults = FaultSet{Zombie: true}
			sc.Episodes = []Episode{{Kind: EpZombie, At: 0.3, Pick: 1, Point: job.CrashBeforeCommit},
				{Kind: EpZombie, At: 0.6, Pick: 4, Point: job.CrashBeforeCommit}}
			return sc
		}, []string{"C5"}},
		{"drop-state-writes", sabotageDropStateWrites, func() Scenario { return base(32) }, []string{"C4", "C2"}},
		{"drop-external-state-writes", sabotageDropStateWrites, func() Scenario {
			sc := base(35)
			sc.ExternalState = true
			return sc
		}, []string{"C4", "C2"}},
		{"duplicate-output", sabotageDuplicateOutput, func() Scenario { return base(33) }, []string{"C1"}},
		{"lose-output", sabotageLoseOutput, func() Scenario { return base(34) }, []string{"C1", "C3"}},
		{"drop-frontier-writes", sabotageDropFrontierWrites, func() Scenario {
			sc := base(35)
			sc.Faults = FaultSet{Crash: true}
			sc.CrashProb, sc.CrashBudget = 0.05, 20
			return sc
		}, []string{"C1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Run(context.Background(), c.scenario(), Options{sabotage: c.sabotage})
			if !res.Failed() {
				t.Fatalf("sabotage %s went unnoticed: %s", c.name, res.Summary())
			}
			for _, class := range c.want {
				found := false
				for _, v := range res.Violations {
					found = found || strings.HasPrefix(v, class+":")
				}
				if !found {
					t.Errorf("sabotage %s: no %s violation among %d: %v", c.name, class, len(res.Violations), first(res.Violations, 5))
				}
			}
			t.Logf("%s caught: %v", c.name, first(res.Violations, 3))
		})
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
