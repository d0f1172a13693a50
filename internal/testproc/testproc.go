// Package testproc holds what tests that start real server processes
// (PostgreSQL, ClickHouse, ZooKeeper, processes in the network namespaces
// of internal/testhosts) share: running a program as another OS user with
// the child's PID being the program's own, free loopback ports, the end of
// a log file for failure messages, and the rule for a missing service
// (skip, but fail under CI=true).
package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-stream/weir/internal/freeport"
)

// Command runs name with args, as the OS user asUser when it is not ""
// (setpriv execs, so the child's PID is the program's own: tests stop
// servers by PID). The child gets its own process group, so a ^C of the
// test reaches it only through the test's own Stop.
func Command(asUser, name string, args ...string) *exec.Cmd {
	return CommandUnder(nil, asUser, name, args...)
}

// CommandUnder is Command run under launcher, a command prefix that execs
// its arguments in place (such as "ip netns exec NAME"), so the child's
// PID is still the program's own. A nil launcher is Command.
func CommandUnder(launcher []string, asUser, name string, args ...string) *exec.Cmd {
	argv := append([]string(nil), launcher...)
	if asUser != "" {
		argv = append(argv, "setpriv", "--reuid="+asUser, "--regid="+asUser, "--init-groups")
	}
	argv = append(append(argv, name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// IDs returns the numeric user and primary group ids of the OS user name,
// for chown-ing what a server running as that user must write.
func IDs(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(u.Uid, &uid); err != nil {
		return 0, 0, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	if _, err := fmt.Sscan(u.Gid, &gid); err != nil {
		return 0, 0, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	return uid, gid, nil
}

// Missing reports that a service a test needs is not here: it skips t with
// msg, except under CI=true, where it fails t — CI installs every service,
// so a missing one there is a broken build, never a silent skip. msg names
// the service and the command that installs it.
//
// go test shows a skip only with -v, so the skip is also appended to the
// file named by $WEIR_SKIP_LOG (a line "test name<TAB>msg"), from which
// scripts/test — the README's test command — prints one summary line at
// the end of the run.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	RecordSkip(t, msg)
	t.Skip(msg)
}

// Long reports whether the long runs are asked for (WEIR_LONG=1): the
// chaos swarm and the metamorphic test at full length, the process-level
// and multi-host chaos, the hand-written loops' SIGKILL tests and the
// real-broker Kafka suite. The README's test command (scripts/test) leaves
// them out to stay within 10 minutes on 2 cores; .ci/run runs them after it
// (scripts/test --long).
func Long() bool { return os.Getenv("WEIR_LONG") == "1" }

// SkipUnlessLong skips t, saying how to run it, unless Long.
func SkipUnlessLong(t testing.TB) {
	t.Helper()
	if !Long() {
		t.Skip("a long run: WEIR_LONG=1 runs it (scripts/test --long)")
	}
}

// RecordSkip appends "t's name<TAB>msg" to $WEIR_SKIP_LOG, if set: a skip
// the run's summary must name. One write of one line to a file opened for
// appending, so that test binaries running in parallel do not interleave.
func RecordSkip(t testing.TB, msg string) {
	path := os.Getenv("WEIR_SKIP_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	line := strings.NewReplacer("\t", " ", "\n", " ").Replace(msg)
	f.WriteString(t.Name() + "\t" + line + "\n")
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (free when
// asked: a server started right after normally gets them).
func FreePorts(n int) ([]int, error) { return freeport.Loopback(n) }

// Tail returns the last 3000 bytes of the file at path, headed by its
// path, or "" if it cannot be read.
func Tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return path + ":\n" + string(b)
}
