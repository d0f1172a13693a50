package weirtest_test

import (
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/weirtest"
)

var seen = weir.NewState[int64]("seen")

// wordCount is a user's Transform: it counts each word and emits the
// running count.
func wordCount() weir.Computation {
	return weir.Transform(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		n, err := seen.Get(ctx)
		if err != nil {
			return err
		}
		n++
		seen.Set(ctx, n)
		return out.Add("out", weir.Row{"word": m.Payload["word"], "n": n})
	})
}

// TestWordCountExactlyOnce checks a user's computation the way weir checks
// its own: under crashes at every point of the epoch, lost
// acknowledgements and commits that land late, it commits exactly what a
// run without faults commits.
func TestWordCountExactlyOnce(t *testing.T) {
	words := strings.Fields("the quick brown fox jumps over the lazy dog the end")
	input := make([]any, len(words))
	for i, w := range words {
		input[i] = w
	}
	weirtest.ExactlyOnce(t, weirtest.Case{
		Code:    wordCount(),
		GroupBy: []string{"word"},
		Input:   weirtest.Rows("word", input...),
	}, 1, 2, 3, 4, 5)
}

// TestBrokenComputationCaught: a computation that is not deterministic in
// the way a Swift computation must be — here it emits a different row on a
// replay — is caught by the same check.
func TestBrokenComputationCaught(t *testing.T) {
	calls := 0
	flaky := weir.SwiftMap(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		calls++
		return out.Add("out", weir.Row{"word": m.Payload["word"], "call": int64(calls)})
	})
	ft := &fakeT{TB: t}
	weirtest.ExactlyOnce(ft, weirtest.Case{Code: flaky, GroupBy: []string{"word"}, Input: weirtest.Rows("word", "a", "b", "c")}, 1)
	if !ft.failed {
		t.Fatal("a non-deterministic SwiftMap passed the exactly-once check")
	}
}

// fakeT records failures instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.TB.Fatalf("unexpected fatal error: "+format, args...)
}
