package main

// A full disk and a read-only mount, through the real binary on a small
// tmpfs (issue 25 items 1 and 2): 'weir run' pauses with one clear line,
// stops at once on SIGTERM, and resumes exactly once when space is freed;
// 'weir queue write' fails at once saying exactly what was written;
// 'weir store check' tells leftovers and a read-only mount from damage.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends. Mounting needs root (CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		testproc.Missing(t, "mounting a tmpfs needs root (CAP_SYS_ADMIN) and mount(8): run the tests as root ("+strings.TrimSpace(string(out))+")")
	}
	t.Cleanup(func() { unmount(t, mnt) })
	return mnt
}

func unmount(t *testing.T, mnt string) {
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Errorf("umount %s: %v: %s", mnt, err, out)
	}
}

// freeBytes is the space available on dir's filesystem.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fillTo writes a ballast file into mnt that leaves about free bytes free,
// and returns its path.
func fillTo(t *testing.T, mnt string, free int64) string {
	t.Helper()
	path := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(path, make([]byte, freeBytes(t, mnt)-free), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fullDiskRun is one 'weir run' on a data directory of a small tmpfs.
type fullDiskRun struct {
	cmd    *exec.Cmd
	stderr *testproc.Buffer
	done   chan error
}

func startFullDiskRun(t *testing.T, dir string) *fullDiskRun {
	t.Helper()
	r := &fullDiskRun{stderr: &testproc.Buffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command(weirBin, "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
		r.done <- nil
	})
	return r
}

// waitFor waits until stderr contains s.
func (r *fullDiskRun) waitFor(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(r.stderr.String(), s) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("weir run exited (%v) before saying %q:\n%.3000s", err, s, r.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("weir run did not say %q within %v:\n%.3000s", s, within, r.stderr.String())
		}
	}
}

// exit waits for the run's exit.
func (r *fullDiskRun) exit(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(within):
		t.Fatalf("weir run did not exit within %v:\n%.3000s", within, r.stderr.String())
		return nil
	}
}

// checkPausedLog: the pause is said once, in one message naming the
// directory and the space needed, then summarized at most every 10 s;
// Pebble's retries are not logged.
func checkPausedLog(t *testing.T, out, dir string, elapsed time.Duration) {
	t.Helper()
	if n := strings.Count(out, "PAUSED: no space left on the device of "+filepath.Join(dir, "store")); n != 1 {
		t.Fatalf("%d PAUSED lines naming %s, want 1:\n%.3000s", n, dir, out)
	}
	if !regexp.MustCompile(`PAUSED: .* free, at least [0-9.]+ [KM]iB needed`).MatchString(out) || !strings.Contains(out, "resumes by itself") {
		t.Fatalf("the PAUSED line does not say what is needed and what happens:\n%.3000s", out)
	}
	if max := 1 + int(elapsed/(10*time.Second)); strings.Count(out, "still PAUSED") > max {
		t.Fatalf("more than %d summaries in %v:\n%.3000s", max, elapsed, out)
	}
	for _, bad := range []string{"background error", "goroutine ", "commit outcome unknown", "nothing was written"} {
		if strings.Contains(out, bad) {
			t.Fatalf("stderr has %q:\n%.3000s", bad, out)
		}
	}
	if n := strings.Count(out, "\n"); n > 20 {
		t.Fatalf("%d lines on stderr:\n%.3000s", n, out)
	}
}

// TestFullDiskPausesAndResumes: on a 3 MB tmpfs, 'weir run' fills the
// disk while it runs: it pauses with one clear message and exits at once
// on SIGTERM; the same command, with the disk still full, pauses again at
// the start and resumes by itself once space is freed; every key's counts
// are then 1..n, once each.
func TestFullDiskPausesAndResumes(t *testing.T) {
	mnt := mountTmpfs(t, "3m")
	dir := filepath.Join(mnt, "d")
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "3", "events")
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", "counts")
	want := map[string]int{}
	for i := range 8 { // in 8 writes: each one's open flushes the log of the one before
		writeEvents(t, dir, 5000, 50, uint64(41+i), want)
	}
	ballast := fillTo(t, mnt, 1500<<10)

	// The run fills the disk: paused.
	r := startFullDiskRun(t, dir)
	r.waitFor(t, "PAUSED:", 30*time.Second)
	time.Sleep(500 * time.Millisecond) // a loop would show by now
	sig := time.Now()
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.exit(t, 3*time.Second); err != nil {
		t.Fatalf("weir run stopped while paused: %v\n%s", err, r.stderr.String())
	}
	t.Logf("SIGTERM while paused: exited after %v", time.Since(sig).Round(time.Millisecond))
	out := r.stderr.String()
	checkPausedLog(t, out, dir, time.Since(sig))
	if !strings.Contains(out, "signal received while paused") {
		t.Fatalf("the stop is not explained:\n%s", out)
	}
	t.Logf("first run's stderr:\n%s", out)

	// The same command on the full disk: paused at the start, resumed when
	// the ballast is deleted.
	r = startFullDiskRun(t, dir)
	r.waitFor(t, "PAUSED:", 10*time.Second)
	paused := time.Now()
	r.waitFor(t, "still PAUSED", 12*time.Second) // the summary, 10 s later
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "resuming", 10*time.Second)
	if err := r.exit(t, time.Minute); err != nil {
		t.Fatalf("weir run after space was freed: %v\n%s", err, r.stderr.String())
	}
	out = r.stderr.String()
	checkPausedLog(t, out, dir, time.Since(paused))
	if !strings.Contains(out, "pipeline completed") {
		t.Fatalf("not completed:\n%s", out)
	}
	t.Logf("second run's stderr:\n%s", out)
	checkExact(t, readCounts(t, dir), want)
	if out := weir(t, "", "store", "check", "--data", dir); !strings.Contains(out, "no damage found") {
		t.Fatalf("weir store check after the full disk:\n%s", out)
	}
}

// TestQueueWriteOnFullDisk: 'weir queue write' of more than the disk
// holds fails at once, saying nothing was written (it looked), and a
// write on a disk too full to open the store fails at once too, saying
// why; nothing was written either time.
func TestQueueWriteOnFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "3m")
	dir := filepath.Join(mnt, "d")
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "3", "events")
	ballast := fillTo(t, mnt, 800<<10)
	var in strings.Builder
	for i := range 35000 {
		fmt.Fprintf(&in, `{"key": "k%d", "i": %d, "pad": %q}`+"\n", i%26, i, strings.Repeat("x", 30))
	}
	for _, full := range []bool{false, true} {
		cmd := exec.Command(weirBin, "queue", "write", "--data", dir, "events")
		cmd.Stdin = strings.NewReader(in.String())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("weir queue write hangs on a full disk:\n%.2000s", stderr.String())
		}
		out := stderr.String()
		t.Logf("full=%v: exit %v after %v:\n%s", full, err, time.Since(start).Round(time.Millisecond), out)
		if err == nil {
			t.Fatalf("weir queue write succeeded on a full disk: %s", stdout.String())
		}
		if !strings.Contains(out, "no space left on the device of "+filepath.Join(dir, "store")) || !strings.Contains(out, "needed") {
			t.Fatalf("the error does not name the directory and the space needed:\n%s", out)
		}
		// Nothing was written: either the store refused the commit before
		// writing it (a large one: pebble.Store.roomForBatch), or the commit
		// failed and reading the store again shows the queue as it was.
		if !full && (!strings.Contains(out, "nothing was written") && !strings.Contains(out, "Nothing was written: reading the store again") || strings.Contains(out, "outcome unknown")) {
			t.Fatalf("the error does not say exactly what was written:\n%s", out)
		}
		if strings.Count(out, "\n") > 5 || strings.Contains(out, "background error") {
			t.Fatalf("more than one message:\n%s", out)
		}
		if got := weir(t, "", "queue", "read", "--data", dir, "events"); got != "" {
			t.Fatalf("rows were written: %.300s", got)
		}
		// The second round: the disk is too full to open the store.
		if err := os.WriteFile(ballast+"2", make([]byte, freeBytes(t, mnt)), 0o644); err != nil && !strings.Contains(err.Error(), "no space") {
			t.Fatal(err)
		}
	}
	os.Remove(ballast)
	os.Remove(ballast + "2")
	weir(t, "{\"key\": \"a\"}\n", "queue", "write", "--data", dir, "events")
	if got := weir(t, "", "queue", "read", "--data", dir, "events"); strings.Count(got, "\n") != 1 {
		t.Fatalf("after space was freed: %q", got)
	}
}

// TestStoreCheckLeftover: a healthy store with an empty table file that
// is no part of the database (what a flush that failed on a full disk
// leaves) checks healthy, with a note, and advises no restore.
func TestStoreCheckLeftover(t *testing.T) {
	dir, _ := setup(t, 2000, 20, 42)
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	leftover := filepath.Join(dir, "store", "999999.sst")
	if err := os.WriteFile(leftover, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := weir(t, "", "store", "check", "--data", dir)
	if !strings.Contains(out, "no damage found") || !strings.Contains(out, "leftover (not damage): "+leftover) || strings.Contains(out, "DAMAGED") {
		t.Fatalf("a store with a leftover table file:\n%s", out)
	}
}

// TestStoreCheckReadOnly: a healthy store on a read-only bind mount
// checks healthy, saying it is read-only, and advises no restore.
func TestStoreCheckReadOnly(t *testing.T) {
	dir, _ := setup(t, 2000, 20, 43)
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", dir, ro).CombinedOutput(); err != nil {
		testproc.Missing(t, "a bind mount needs root (CAP_SYS_ADMIN) and mount(8): run the tests as root ("+strings.TrimSpace(string(out))+")")
	}
	t.Cleanup(func() { unmount(t, ro) })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", ro).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644); err == nil {
		t.Fatal("the bind mount is writable")
	}
	out := weir(t, "", "store", "check", "--data", ro)
	if !strings.Contains(out, "no damage found") || !strings.Contains(out, "read-only filesystem") || strings.Contains(out, "DAMAGED") {
		t.Fatalf("a store on a read-only mount:\n%s", out)
	}
	t.Logf("weir store check on a read-only mount:\n%s", out)
}
