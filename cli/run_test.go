package cli

import (
	"strings"
	"testing"

	"github.com/weir-stream/weir/engine"
)

// TestFailingNote: the progress line and the final summary name a failing
// partition with its count and last error, and how many more there are.
func TestFailingNote(t *testing.T) {
	if n := failingNote(engine.Status{}); n != "" {
		t.Fatalf("healthy pipeline: note %q", n)
	}
	s := engine.Status{Failing: []engine.Failing{
		{Partition: "Counter/0", ConsecutiveFailures: 3, LastError: "computation Counter: message x: " + strings.Repeat("bad ", 50)},
		{Partition: "Counter/2", ConsecutiveFailures: 1, LastError: "sink out stopped delivering: 400"},
	}}
	n := failingNote(s)
	for _, w := range []string{"FAILING: Counter/0 (3× in a row: computation Counter: message x: bad", "...", "and 1 more partition(s)"} {
		if !strings.Contains(n, w) {
			t.Errorf("note %q lacks %q", n, w)
		}
	}
	if len(n) > 250 {
		t.Errorf("note is %d bytes long; the error should be cut", len(n))
	}
}
