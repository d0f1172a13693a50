package mavenlibs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirAndAvailable: the environment variable names the directory; a set
// whose marker jar is missing is unavailable with an error naming the
// directory and the command that fetches it, and available once it is
// there (given a JDK).
func TestDirAndAvailable(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WEIR_TEST_LIBS", dir)
	l := Libs{Name: "x", Version: "1.0", Env: "WEIR_TEST_LIBS", Marker: "x-1.0.jar", Fetcher: "go run ./fetch-x"}
	if l.Dir() != dir {
		t.Fatalf("Dir = %s, want %s", l.Dir(), dir)
	}
	if l.Fetched() {
		t.Fatal("fetched without the marker jar")
	}
	err := l.Available()
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "go run ./fetch-x") {
		t.Fatalf("Available: %v, want the directory and the fetch command named", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x-1.0.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !l.Fetched() {
		t.Fatal("not fetched with the marker jar")
	}
	if got := l.Classpath("/c"); got != filepath.Join(dir, "*")+string(os.PathListSeparator)+"/c" {
		t.Errorf("Classpath = %s", got)
	}
}
