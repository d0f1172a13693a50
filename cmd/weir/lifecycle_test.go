package main

// End-to-end tests of a pipeline's life across runs and of how it ends
// (issue 13, "silent or wrong outcomes" 1–3): a rerun after completion
// processes what arrived since, exactly once.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runWeir runs the binary to its end and returns its stderr and exit code.
func runWeir(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(weirBin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return errb.String(), 0
	case errors.As(err, &exit):
		return errb.String(), exit.ExitCode()
	}
	t.Fatalf("weir %v: %v", args, err)
	return "", 0
}

// writeSpec writes text to a spec file in a temporary directory.
func writeSpec(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// editSpec returns example's spec with old replaced by new once.
func editSpec(t *testing.T, example, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(exampleSpec(example))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not in the %s spec", old, example)
	}
	return string(bytes.Replace(b, []byte(old), []byte(new), 1))
}

// TestRerunAfterCompletion (issue 13 item 1): README's "Using it" steps
// repeated. A completed run is final, but running 'weir run' again starts
// a new run that processes the rows written since — under SIGKILLs too —
// and says so; a rerun with nothing new completes without output; a
// changed static spec is accepted on a completed pipeline and processes
// the next rows. Every key's counts stay exactly 1..n across all runs
// (positions, dedup floors and watermarks carry over: a completed
// computation's watermark is a store timestamp, so the downstream Counter
// does not drop the next run's rows as processed).
func TestRerunAfterCompletion(t *testing.T) {
	dir, want := setup(t, 4000, 60, 21)
	spec := exampleSpec("counter")
	if errOut, code := runWeir(t, "run", "--data", dir, "--spec", spec, "--progress", "0"); code != 0 || !strings.Contains(errOut, "pipeline completed") {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	checkExact(t, readCounts(t, dir), want)

	writeEvents(t, dir, 3000, 60, 22, want)
	kills := runKilled(t, dir, spec, 22, 3)
	t.Logf("second run: %d SIGKILLs", kills)
	checkExact(t, readCounts(t, dir), want)

	errOut, code := runWeir(t, "run", "--data", dir, "--spec", spec, "--progress", "0")
	if code != 0 {
		t.Fatalf("rerun without new rows: exit %d\n%s", code, errOut)
	}
	for _, w := range []string{"previous run completed", "new run", "pipeline completed", "no new input"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("the rerun without new rows does not say %q:\n%s", w, errOut)
		}
	}
	checkExact(t, readCounts(t, dir), want)

	// A different static spec (Counter repartitioned) on the completed
	// pipeline: accepted, and it processes the next rows.
	eight := writeSpec(t, "eight.yson", editSpec(t, "counter", `"group_by" = ["key"];`, `"group_by" = ["key"]; "partition_count" = 8;`))
	writeEvents(t, dir, 2000, 60, 23, want)
	if errOut, code := runWeir(t, "run", "--data", dir, "--spec", eight, "--progress", "0"); code != 0 || !strings.Contains(errOut, "pipeline completed") {
		t.Fatalf("run with a changed spec: exit %d\n%s", code, errOut)
	}
	checkExact(t, readCounts(t, dir), want)
}
