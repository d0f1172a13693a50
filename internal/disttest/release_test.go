package disttest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
)

// previousRelease returns a weir binary of the previous release, the
// commit testdata/previous-release names, built from this repository's
// git history (git archive into a temporary directory, go build there;
// the module and build caches are shared with this build, so only what
// changed since is compiled). Its cli.Version says "previous-<commit>".
// Without the commit in the history (a shallow clone) the test is
// skipped, or fails under CI=true.
func previousRelease(t *testing.T) string {
	t.Helper()
	commit := readPreviousRelease(t)
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testproc.Missing(t, fmt.Sprintf("a git checkout of weir (to build the previous release): %v", err))
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		testproc.Missing(t, fmt.Sprintf("the previous release %s in the git history (a shallow clone? git fetch --unshallow): %v", commit, err))
	}
	src := t.TempDir()
	if out, err := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, src).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	bin := filepath.Join(filepath.Dir(weirBin), "weir-previous")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X github.com/weir-stream/weir/cli.Version=previous-"+commit, "./cmd/weir")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %s: %v\n%s", commit, err, out)
	}
	return bin
}

// readPreviousRelease reads the commit of testdata/previous-release (its
// first line that is not a comment).
func readPreviousRelease(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "previous-release"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	t.Fatal("testdata/previous-release names no commit")
	return ""
}
