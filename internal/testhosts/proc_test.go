package testhosts

// Tests of processes in hosts: they run inside the host's namespace, as
// the OS user asked, with the environment given, by their own PID; and a
// host kill leaves no process of the host — forked children, children in
// sessions of their own, other users' processes — while other hosts' live.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestProcessInHost(t *testing.T) {
	n := New(t, "a")
	a := n.Host("a")
	u, err := pgtest.OSUser()
	if err != nil {
		testproc.Missing(t, err.Error())
	}
	p, err := a.Start(Cmd{Name: "probe", Path: "/bin/sh", User: u, Env: []string{"WEIR_PROBE=42"},
		Args: []string{"-c", `echo "pid=$$ user=$(id -un) probe=$WEIR_PROBE"; ip -4 -o addr show dev eth0`}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, p.Tail())
	}
	out := p.Output()
	if want := fmt.Sprintf("pid=%d user=%s probe=42\n", p.PID, u); !strings.HasPrefix(out, want) {
		t.Fatalf("output %q, want it to start with %q (the program's own PID, user and environment)", out, want)
	}
	if !strings.Contains(out, a.Addr.String()+"/24") {
		t.Fatalf("output %q: eth0 does not have the host's address %s", out, a.Addr)
	}

	// Signals reach the process by its PID.
	sleeper, err := a.Start(Cmd{Path: "sleep", Args: []string{"600"}, User: u})
	if err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := sleeper.Wait(); !errors.As(err, &ee) || ee.String() != "signal: terminated" {
		t.Fatalf("after SIGTERM: %v, want signal: terminated", err)
	}
	if err := sleeper.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal of an ended process: %v, want nil", err)
	}
}

func TestKillHostLeavesNoProcess(t *testing.T) {
	n := New(t, "k", "other")
	k, other := n.Host("k"), n.Host("other")
	u, err := pgtest.OSUser()
	if err != nil {
		testproc.Missing(t, err.Error())
	}
	// A shell with children: one in the background, one in a session of
	// its own (out of the shell's process group), one run as another user.
	tree, err := k.Start(Cmd{Name: "tree", Path: "/bin/sh", Args: []string{"-c",
		"sleep 600 & setsid sleep 600 & setpriv --reuid=" + u + " --regid=" + u + " --init-groups sleep 600 & echo started; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	survivor, err := other.Start(Cmd{Name: "sleep", Path: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	await(t, tree, "started")
	before, err := k.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) < 4 || !slices.Contains(before, tree.PID) {
		t.Fatalf("host k's processes %v: want the shell %d and its 3 children", before, tree.PID)
	}

	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if after, err := k.PIDs(); err != nil || len(after) != 0 {
		t.Fatalf("after Kill, host k has processes %v (%v)", after, err)
	}
	for _, pid := range before {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && pidInNetns(pid, k) {
			t.Fatalf("process %d of host k is still there", pid)
		}
	}
	var ee *exec.ExitError
	if err := tree.Wait(); !errors.As(err, &ee) || ee.String() != "signal: killed" {
		t.Fatalf("the shell ended with %v, want signal: killed", err)
	}
	select {
	case <-survivor.Done():
		t.Fatalf("a process of another host died: %v", survivor.Wait())
	default:
	}
	if pids, _ := other.PIDs(); !slices.Contains(pids, survivor.PID) {
		t.Fatalf("host other's processes %v lack %d", pids, survivor.PID)
	}

	// A killed host runs processes again, as a rebooted machine would.
	again, err := k.Start(Cmd{Path: "/bin/sh", Args: []string{"-c", "echo up again"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Wait(); err != nil || again.Output() != "up again\n" {
		t.Fatalf("after Kill: %v %q", err, again.Output())
	}
}

// pidInNetns reports whether pid (if it exists) is in h's namespace —
// a PID reused by an unrelated process elsewhere is not a survivor.
func pidInNetns(pid int, h *Host) bool {
	pids, _ := h.PIDs()
	return slices.Contains(pids, pid)
}
