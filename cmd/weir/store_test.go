package main

// A damaged store through the real binary: one clear message naming the
// file and what to do, a non-zero exit in bounded time, and 'weir store
// check' naming the damage. Read-only commands create nothing, and a data
// directory is as small as its data.

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/weir-stream/weir/internal/testproc"
)

// flushStore moves the memtable of DIR's (closed) store into an .sst.
func flushStore(t *testing.T, dir string) {
	t.Helper()
	db, err := pebbledb.Open(filepath.Join(dir, "store"), &pebbledb.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// runToEnd runs 'weir run' and returns its exit error and stderr; it fails
// the test if the run takes more than a minute (a retry loop).
func runToEnd(t *testing.T, dir, spec string) (string, error) {
	t.Helper()
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", spec, "--progress", "0")
	var stderr testproc.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("weir run on a damaged store did not exit:\n%.3000s", stderr.String())
		return "", nil
	}
}

// checkDamageMessage: the run failed with one message naming want and
// saying what to do, without Go or Pebble stack traces.
func checkDamageMessage(t *testing.T, err error, out, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("weir exited 0 on a damaged store:\n%s", out)
	}
	if !strings.Contains(out, want) || !strings.Contains(out, "weir store check --data") || !strings.Contains(out, "restore") {
		t.Fatalf("the message does not name %q and what to do:\n%s", want, out)
	}
	if strings.Contains(out, "goroutine ") || strings.Contains(out, ".go:") || strings.Contains(out, "stack trace") {
		t.Fatalf("stack traces on stderr:\n%.3000s", out)
	}
	if n := strings.Count(out, "\n"); n > 15 {
		t.Fatalf("%d lines on stderr, want one message:\n%.3000s", n, out)
	}
}

// TestDamagedTableStopsRun: a flipped byte in a table file stops 'weir
// run' with one message naming the file, and 'weir store check' names it.
func TestDamagedTableStopsRun(t *testing.T) {
	dir, _ := setup(t, 20000, 50, 31)
	flushStore(t, dir)
	ssts, _ := filepath.Glob(filepath.Join(dir, "store", "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("tables: %v", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	os.WriteFile(ssts[0], b, 0o644)

	out, err := runToEnd(t, dir, exampleSpec("counter"))
	checkDamageMessage(t, err, out, ssts[0]+" is damaged")

	cmd := exec.Command(weirBin, "store", "check", "--data", dir)
	report, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(report), "DAMAGED: ") || !strings.Contains(string(report), ssts[0]+": ") {
		t.Fatalf("weir store check: %v\n%s", err, report)
	}
}

// TestDeletedLogRefused: deleting the write-ahead log between runs loses
// acknowledged commits; weir notices and refuses rather than produce
// silently wrong output. An intact directory checks clean.
func TestDeletedLogRefused(t *testing.T) {
	dir, _ := setup(t, 2000, 20, 32)
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	if out := weir(t, "", "store", "check", "--data", dir); !strings.Contains(out, "no damage found") {
		t.Fatalf("an intact store: %s", out)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "store", "*.log"))
	for _, l := range logs {
		os.Remove(l)
	}
	const want = "write-ahead log records are missing"
	out := weirFails(t, "", "queue", "read", "--data", dir, "counts")
	checkDamageMessage(t, errExit, out, want)
	out, err := runToEnd(t, dir, exampleSpec("counter"))
	checkDamageMessage(t, err, out, want)
	report := weirFails(t, "", "store", "check", "--data", dir)
	if !strings.Contains(report, "DAMAGED: ") || !strings.Contains(report, want) {
		t.Fatalf("weir store check:\n%s", report)
	}
}

// errExit stands for the failure weirFails already checked.
var errExit = exec.ErrNotFound

// TestReadOnlyCommandsCreateNothing: a mistyped --data on a read-only
// command is an error and creates nothing.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"queue", "read", "--data", typo, "q"},
		{"queue", "list", "--data", typo},
		{"store", "check", "--data", typo},
		{"pipeline", "status", "--data", typo},
	} {
		out := weirFails(t, "", args...)
		if !strings.Contains(out, typo) {
			t.Errorf("weir %v: %s", args, out)
		}
		if _, err := os.Stat(typo); err == nil {
			t.Fatalf("weir %v created %s", args, typo)
		}
	}
}

// TestDataDirIsSmall: a data directory with a few thousand rows takes a
// few megabytes on disk, not the 71 MB of a preallocated log.
func TestDataDirIsSmall(t *testing.T) {
	dir, _ := setup(t, 2000, 20, 33)
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0")
	var used int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var st syscall.Stat_t
			if syscall.Stat(path, &st) == nil {
				used += st.Blocks * 512
			}
		}
		return nil
	})
	if used > 8<<20 {
		t.Fatalf("the data directory uses %d bytes on disk", used)
	}
	t.Logf("data directory: %d KiB on disk", used>>10)
}
