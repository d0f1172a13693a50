package testhosts

// Tests that a crashed test leaves nothing behind for long: a test binary
// that made a network with a PostgreSQL host and a process, then died by
// SIGKILL (so none of its cleanups ran), leaves namespaces, live
// processes, a shared memory segment and a directory; the sweep that the
// next New runs removes them all, and leaves live owners' networks alone.

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

const crashChildEnv = "WEIR_TESTHOSTS_CRASH_CHILD"

func TestCrashedTestLeavesNothingBehind(t *testing.T) {
	if os.Getenv(crashChildEnv) == "1" {
		crashChild(t)
		return
	}
	pgtest.Require(t)
	live := New(t, "live") // a live owner's network: the sweep must keep it

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^TestCrashedTestLeavesNothingBehind$", "-test.v")
	child.Env = append(os.Environ(), crashChildEnv+"=1")
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var report string
	var childOut strings.Builder // the child's -test.v output, shown if it fails
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if r, ok := strings.CutPrefix(sc.Text(), "CRASH-CHILD "); ok {
			report = r
			break
		}
		childOut.WriteString(sc.Text() + "\n")
	}
	if report == "" {
		_ = child.Process.Kill()
		t.Fatalf("the child test ended without reporting its network: %v; its output:\n%s", child.Wait(), childOut.String())
	}
	// The child is SIGKILLed: none of its cleanups runs.
	_ = child.Process.Kill()
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(discard{}) }()
	_ = child.Wait()

	var id, dir string
	var key int32
	var shmid int
	var procs []string
	for _, f := range strings.Fields(report) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "id":
			id = v
		case "dir":
			dir = v
		case "shm":
			fmt.Sscanf(v, "%d/%d", &key, &shmid)
		case "proc":
			procs = append(procs, v)
		}
	}
	leftovers := func() []string { return leftovers(t, id, dir, procs, key, shmid) }
	left := leftovers()
	if len(left) < 4 || len(procs) < 3 {
		t.Fatalf("the crashed child left %v (processes %v): want its namespaces, processes, directory and segment, or this test proves nothing", left, procs)
	}

	if err := sweepStale(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(); len(left) != 0 {
		t.Fatalf("after the sweep, left: %v", left)
	}
	if pids, err := live.Host("live").PIDs(); err != nil {
		t.Fatalf("the sweep removed a live owner's host: %v (%v)", pids, err)
	}
}

// leftovers lists what is left of a network: its namespaces (by its id),
// the processes (owner identities "<pid>.<start>") that still run, its
// directory and the shared memory segment key/shmid.
func leftovers(t *testing.T, id, dir string, procs []string, key int32, shmid int) []string {
	t.Helper()
	var left []string
	nss, _ := filepath.Glob("/run/netns/" + nsPrefix + id + "-*")
	left = append(left, nss...)
	for _, p := range procs {
		if alive(p) {
			left = append(left, "process "+p)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		left = append(left, dir)
	}
	if segmentExists(t, key, shmid) {
		left = append(left, fmt.Sprintf("shm segment %d", shmid))
	}
	return left
}

// TestCloseLeavesNothing: the teardown of a network with a PostgreSQL
// host crashed once (its segment released, then relaunched), processes
// as root and as another user, and a partitioned host removes the
// namespaces, processes, shared memory and directory.
func TestCloseLeavesNothing(t *testing.T) {
	pgtest.Require(t)
	n := New(t, "pg", "w", "cut")
	pg, err := n.Host("pg").StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Relaunch(); err != nil {
		t.Fatal(err)
	}
	u, err := pgtest.OSUser()
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"", u} {
		p, err := n.Host("w").Start(Cmd{Path: "/bin/sh", Args: []string{"-c", "echo up; exec sleep 600"}, User: user})
		if err != nil {
			t.Fatal(err)
		}
		await(t, p, "up") // inside the host by now
	}
	if err := n.Host("cut").Partition(); err != nil {
		t.Fatal(err)
	}
	key, shmid := segmentOf(t, pg)
	var procs []string
	for _, h := range n.Hosts() {
		pids, err := h.PIDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if start, _, err := startTime(pid); err == nil {
				procs = append(procs, fmt.Sprintf("%d.%d", pid, start))
			}
		}
	}
	if len(procs) < 4 {
		t.Fatalf("processes %v: want PostgreSQL's and the two sleeps", procs)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, n.id, n.dir, procs, key, shmid); len(left) != 0 {
		t.Fatalf("after Close, left: %v", left)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// crashChild is the child's side: a network with PostgreSQL and a
// process, reported on stdout, then it waits to be killed.
func crashChild(t *testing.T) {
	n := New(t, "pg", "w")
	pg, err := n.Host("pg").StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Host("w").Start(Cmd{Path: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatal(err)
	}
	key, shmid := segmentOf(t, pg)
	report := fmt.Sprintf("CRASH-CHILD id=%s dir=%s shm=%d/%d", n.id, n.dir, key, shmid)
	for _, h := range n.Hosts() {
		pids, err := h.PIDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			start, ended, err := startTime(pid)
			if errors.Is(err, fs.ErrNotExist) || ended {
				continue // a short-lived process (a PostgreSQL worker) gone meanwhile
			}
			if err != nil {
				t.Fatal(err)
			}
			report += fmt.Sprintf(" proc=%d.%d", pid, start)
		}
	}
	fmt.Println(report)
	time.Sleep(time.Hour) // until the parent's SIGKILL
}
