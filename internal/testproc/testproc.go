// Package testproc holds what tests that start real server processes
// (PostgreSQL, ClickHouse, ZooKeeper, processes in the network namespaces
// of internal/testhosts) share: running a program as another OS user with
// the child's PID being the program's own, free loopback ports, the end of
// a log file for failure messages, and the rule for a missing service
// (skip, but fail under CI=true).
package testproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"syscall"
	"testing"
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
// so a missing one there is a broken build, never a silent skip.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (free when
// asked: a server started right after normally gets them).
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

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
