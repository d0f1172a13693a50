package cli

import (
	"strings"
	"testing"

	"github.com/weir-stream/weir/board"
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

// TestSummarizeSinkDropped: outputs an at-most-once sink gave up show in
// the final summary line, next to the computation's counts.
func TestSummarizeSinkDropped(t *testing.T) {
	s := engine.Status{Computations: map[string]board.Counters{"Counter": {Inputs: 10, Outputs: 10, SinkDropped: 4}}}
	if got := summarize(s); !strings.Contains(got, "Counter 10 in, 10 out, 4 DROPPED by at-most-once sinks") {
		t.Errorf("summary %q does not report the 4 dropped outputs", got)
	}
	s.Computations["Counter"] = board.Counters{Inputs: 10, Outputs: 10}
	if got := summarize(s); strings.Contains(got, "DROPPED") {
		t.Errorf("summary %q reports drops that did not happen", got)
	}
}
