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
	"github.com/weir-stream/weir/store"
)

// proc is a weir process started by a test on loopback, stopped by PID.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testproc.Buffer
	done chan struct{}
	err  error
}

// start runs weir with args; it is killed when the test ends, and its
// output is logged if the test failed.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startBin(t, weirBin, name, args...)
}

// startBin is start with another weir binary (a baseline's, for figures).
func startBin(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &testproc.Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(p.out.String()))
		}
	})
	return p
}

func tail(s string) string {
	if len(s) > 6000 {
		return "…" + s[len(s)-6000:]
	}
	return s
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// stop sends SIGTERM and waits for the process to exit (a worker drains;
// with no controller it stops after its drain timeout or at a second
// signal — this sends the second after a second).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(time.Second):
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, time.Minute)
}

// await waits until the process printed want (a hang guard, not a timed
// assertion: the limit only keeps a broken build from hanging CI).
func (p *proc) await(t *testing.T, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q:\n%s", p.name, p.err, want, tail(p.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, want, limit, tail(p.out.String()))
		}
	}
}

// wait waits for the process to exit.
func (p *proc) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %v:\n%s", p.name, limit, tail(p.out.String()))
		return fmt.Errorf("hung")
	}
}

// eventually polls cond every 10 ms until it holds, failing the test after
// two minutes: a hang guard, not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// distSetup starts the counter of distSpec on a fresh PostgreSQL schema:
// it returns the store's URL and store, the counter, and the spec's path.
func distSetup(t *testing.T) (string, store.Store, *Counter, string) {
	t.Helper()
	url, st := pgStore(t)
	c, err := NewCounter(context.Background(), st, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(spec, []byte(distSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	return url, st, c, spec
}

// startWorkers starts n workers w0… on loopback ports and waits until each
// listens; extra goes on every command line (e.g. "-v").
func startWorkers(t *testing.T, url string, n int, extra ...string) []*proc {
	t.Helper()
	return startWorkersBin(t, weirBin, url, n, extra...)
}

// startWorkersBin is startWorkers with another weir binary.
func startWorkersBin(t *testing.T, bin, url string, n int, extra ...string) []*proc {
	t.Helper()
	ports, err := testproc.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*proc
	for i, port := range ports {
		args := append([]string{"worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", fmt.Sprintf("w%d", i)}, extra...)
		w := startBin(t, bin, fmt.Sprintf("w%d", i), args...)
		w.await(t, "listening on", time.Minute)
		ws = append(ws, w)
	}
	return ws
}
