package disttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// TestWalkthrough runs examples/distributed/walkthrough.sh — the
// walkthrough of docs/distributed.md — as written, as a new user would on
// one machine: weir store init, the counter's queues written with weir
// queue --store, certificates made with openssl, two workers and a
// controller with TLS and a token, the counter to completion and its
// output read; then the streaming counter with a standby controller, fed
// twice and followed to caught_up through GET /status, and /metrics, then
// a handover: the active controller stopped, the standby adopting its jobs
// (its /metrics show them adopted), fed again and counted. The
// script checks each key's counts itself; this test gives it a throwaway
// PostgreSQL (two schemas), free loopback ports and the weir binary.
func TestWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testproc.Missing(t, "the walkthrough needs "+tool)
		}
	}
	base := pgtest.URL(t)
	ports, err := testproc.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "distributed", "walkthrough.sh"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(weirBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STORE="+pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base)),
		"STREAM_STORE="+pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base)),
		"WORK="+work,
		fmt.Sprintf("W1=127.0.0.1:%d", ports[0]), fmt.Sprintf("W2=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("C1=127.0.0.1:%d", ports[2]), fmt.Sprintf("C2=127.0.0.1:%d", ports[3]))
	// Its own process group: whatever the script started is killed with
	// it if it hangs or the test fails.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out testproc.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil || !strings.Contains(out.String(), "walkthrough done") {
		logs, _ := filepath.Glob(filepath.Join(work, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), tail(string(b)))
		}
		t.Fatalf("walkthrough.sh: %v\n%s", err, out.String())
	}
	t.Logf("walkthrough.sh ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
}
