package disttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// weirBin is the weir binary the tests run, built once per test binary.
var weirBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-dist-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// World-readable: the hosts' processes may run as another user.
	os.Chmod(dir, 0o755)
	weirBin = filepath.Join(dir, "weir")
	// The processes run without the race detector (it would slow them
	// several-fold); the test process and the in-process tests have it.
	out, err := exec.Command("go", "build", "-o", weirBin, "../../cmd/weir").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build weir: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if s := pgtest.Shared(); s != nil {
		s.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// counterSpec is the counter example's spec.
func counterSpec() string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "examples", "counter", "spec.yson"))
	return p
}
