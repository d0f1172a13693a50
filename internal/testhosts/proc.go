package testhosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// Cmd is a program to run inside a host.
type Cmd struct {
	// Name labels the process in its log files' names ("worker",
	// "controller"); "" is the program's base name.
	Name string
	// Path is the program; Args its arguments (without the program).
	Path string
	Args []string
	// User is the OS user the program runs as (setpriv); "" runs it as
	// this process's user, root.
	User string
	// Env is added to this process's environment for the program.
	Env []string
	// Dir is the program's working directory; "" is this process's.
	Dir string
}

// Proc is a process started inside a host.
type Proc struct {
	// Host is where the process runs; PID its process id (the program's
	// own: ip netns exec and setpriv exec in place).
	Host *Host
	PID  int
	// Stdout and Stderr are the paths of its output's log files.
	Stdout, Stderr string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped; err is set
	err  error
}

// Start runs c inside the host and returns once the process exists. Its
// output goes to two log files in the network's directory. The process
// is killed with the host (Kill) or at teardown, if it has not ended by
// then.
func (h *Host) Start(c Cmd) (*Proc, error) {
	n := h.net
	name := c.Name
	if name == "" {
		name = filepath.Base(c.Path)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("network closed")
	}
	n.procSeq++
	base := filepath.Join(n.dir, fmt.Sprintf("%s.%s.%d", h.Name, name, n.procSeq))
	n.mu.Unlock()

	p := &Proc{Host: h, Stdout: base + ".out", Stderr: base + ".err", done: make(chan struct{})}
	stdout, err := os.Create(p.Stdout)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(p.Stderr)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	p.cmd = testproc.CommandUnder([]string{"ip", "netns", "exec", h.ns}, c.User, c.Path, c.Args...)
	p.cmd.Env = append(os.Environ(), c.Env...)
	p.cmd.Dir = c.Dir
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr

	// Registered under the lock with the start, so a concurrent Kill or
	// Close either sees the process or runs before it exists.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("network closed")
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s in host %s: %w", c.Path, h.Name, err)
	}
	p.PID = p.cmd.Process.Pid
	n.procs = append(n.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Wait waits for the process to end and returns how it ended (nil for
// exit status 0; an *exec.ExitError otherwise, e.g. "signal: killed"
// after a Kill of its host).
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process by its PID, if it is still running.
func (p *Proc) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Output returns what the process has written to stdout so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Stdout)
	return string(b)
}

// AwaitOutput waits until the process's stdout contains s — a server's
// readiness line, say. It fails when the process ends first or ctx is
// done, with the ends of its logs.
func (p *Proc) AwaitOutput(ctx context.Context, s string) error {
	for {
		if strings.Contains(p.Output(), s) {
			return nil
		}
		select {
		case <-p.done:
			if strings.Contains(p.Output(), s) {
				return nil
			}
			return fmt.Errorf("process %d in host %s ended (%v) before printing %q\n%s", p.PID, p.Host.Name, p.err, s, p.Tail())
		case <-ctx.Done():
			return fmt.Errorf("process %d in host %s has not printed %q: %w\n%s", p.PID, p.Host.Name, s, ctx.Err(), p.Tail())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Tail returns the ends of the process's stdout and stderr, for failure
// messages.
func (p *Proc) Tail() string {
	return testproc.Tail(p.Stdout) + "\n" + testproc.Tail(p.Stderr)
}
