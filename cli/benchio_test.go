package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSelfWritten: a write of 1 MiB moves the counter by at least that
// much.
func TestSelfWritten(t *testing.T) {
	before, ok := selfWritten()
	if !ok {
		t.Skip("/proc/self/io is not readable here")
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	after, _ := selfWritten()
	if after-before < 1<<20 {
		t.Fatalf("wrote 1 MiB, the counter moved by %d bytes", after-before)
	}
}
