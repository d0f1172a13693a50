package disttest

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a weir process started by a test on loopback, stopped by PID.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs weir with args; it is killed when the test ends, and its
// output is logged if the test failed.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(weirBin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
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
