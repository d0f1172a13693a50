package testhosts

// Tests of the rule for a missing kit: without root, a multi-host test
// skips with a message saying why — and under CI=true it fails instead,
// never skipping silently. Shown by running this test binary again as
// the user nobody.

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithoutRootSkipsButFailsUnderCI(t *testing.T) {
	Require(t) // it drops root, so it needs root to begin with
	dir, err := os.MkdirTemp("", "weir-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is private to root: copy it out.
	bin := filepath.Join(dir, "testhosts.test")
	if err := copyFile(bin, mustExecutable(t)); err != nil {
		t.Fatal(err)
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			bin, "-test.run=^TestHostsReachEachOther$", "-test.v")
		cmd.Dir = dir
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "CI=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		if ci != "" {
			cmd.Env = append(cmd.Env, "CI="+ci)
		}
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP: TestHostsReachEachOther") || !strings.Contains(string(out), "not root")):
			t.Fatalf("as nobody: %v\n%s\nwant a skip saying it needs root", err, out)
		case ci == "true" && (err == nil || !strings.Contains(string(out), "--- FAIL: TestHostsReachEachOther") || !strings.Contains(string(out), "CI=true")):
			t.Fatalf("as nobody under CI=true: %v\n%s\nwant a failure", err, out)
		}
		t.Logf("as nobody, CI=%q: %s", ci, lineWith(string(out), "not root"))
	}
}

func mustExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
