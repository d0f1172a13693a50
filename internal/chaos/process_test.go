package chaos

// TestProcessChaos (testing plan L3) builds the real weir binary and runs
// examples/counter, counter-async and external-state under SIGKILLs at random
// moments (restarting the same command each time) and SIGSTOP episodes
// longer than the lease timeout; a concurrent observer reads the output
// queue with `weir queue read` while the process runs. It checks C1 (every
// key's counts exactly 1..n in the output queue), C3 (no row seen while
// running later vanishes or changes) and liveness, and reports recovery
// times. See process.go for what SIGSTOP does and does not prove in
// embedded mode. Skipped with -short.
//
//	WEIR_CHAOS_PROCESS_RUNS=N   runs per example (default 1)
//	WEIR_CHAOS_PROCESS_EVENTS=M events per run (default 20000)

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
)

// buildWeir builds cmd/weir into a temporary directory.
func buildWeir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/weir").CombinedOutput()
	if err != nil {
		t.Fatalf("build weir: %v\n%s", err, out)
	}
	return bin
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

func TestProcessChaos(t *testing.T) {
	testproc.SkipUnlessLong(t) // cmd/weir's SIGKILL tests run in the short suite
	bin := buildWeir(t)
	runs := envInt(t, "WEIR_CHAOS_PROCESS_RUNS", 1)
	events := envInt(t, "WEIR_CHAOS_PROCESS_EVENTS", 20000)
	var total ProcessFigures
	for _, example := range ProcessExamples {
		for i := 0; i < runs; i++ {
			seed := uint64(i + 1)
			t.Run(fmt.Sprintf("%s/%d", example, seed), func(t *testing.T) {
				// The faults come 50–450 ms apart after a SIGSTOP episode: a
				// run that completes before its first SIGKILL proved nothing,
				// so it is repeated with 4× the events (up to 3 times).
				n := events
				for attempt := 1; ; attempt++ {
					res := RunProcess(context.Background(), ProcessConfig{
						Bin: bin, Dir: t.TempDir(), Example: example, Events: n, Keys: 50, Seed: seed,
						Kills: 3, Stops: 1, Logf: t.Logf,
					})
					total.Add(res)
					if res.Failed() {
						t.Fatalf("%v\nsummary: %s\nreplay: WEIR_CHAOS_PROCESS_RUNS=%d WEIR_CHAOS_PROCESS_EVENTS=%d go test ./internal/chaos -run '^TestProcessChaos$/^%s$/^%d$' -v\nlog tail:\n%s",
							res.Violations, res.Summary(), runs, n, example, seed, res.Log)
					}
					t.Logf("%s", res.Summary())
					if res.Kills > 0 {
						return
					}
					if attempt == 3 {
						t.Fatalf("no SIGKILL was injected in %d attempts (the last with %d events): the runs ended too early to prove anything", attempt, n)
					}
					n *= 4
					t.Logf("no SIGKILL landed before the run completed: again with %d events", n)
				}
			})
		}
	}
}
