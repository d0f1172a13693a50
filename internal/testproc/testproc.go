// Package testproc holds what tests that start real server processes
// (PostgreSQL, ClickHouse, ZooKeeper) share: running a program as another
// OS user with the child's PID being the program's own, free loopback
// ports, and the end of a log file for failure messages.
package testproc

import (
	"net"
	"os"
	"os/exec"
	"syscall"
)

// Command runs name with args, as the OS user asUser when it is not ""
// (setpriv execs, so the child's PID is the program's own: tests stop
// servers by PID). The child gets its own process group, so a ^C of the
// test reaches it only through the test's own Stop.
func Command(asUser, name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if asUser != "" {
		cmd = exec.Command("setpriv", append([]string{"--reuid=" + asUser, "--regid=" + asUser, "--init-groups", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
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
