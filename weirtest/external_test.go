package weirtest_test

import (
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/weirtest"
)

// wordTotals is a user's external state table: one row per word.
var wordTotals = &externalstate.Table{Name: "word_totals",
	Key:   []spec.Column{{Name: "word", Type: spec.TypeString}},
	Value: []spec.Column{{Name: "n", Type: spec.TypeInt64}}}

// externalWordCount counts words in the external state table word_totals
// and emits the running count.
func externalWordCount() weir.Computation {
	totals := weir.NewExternalState(wordTotals.Name)
	return weir.Transform(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		w := m.Payload["word"].(string)
		row, _, err := totals.Get(ctx, w)
		if err != nil {
			return err
		}
		n, _ := row["n"].(int64)
		if err := totals.Put(ctx, weir.Row{"word": w, "n": n + 1}); err != nil {
			return err
		}
		return out.Add("out", weir.Row{"word": w, "n": n + 1})
	})
}

// TestExternalStateExactlyOnce: a computation over an external state
// table commits the same outputs and leaves the same rows under faults as
// without.
func TestExternalStateExactlyOnce(t *testing.T) {
	words := strings.Fields("the quick brown fox jumps over the lazy dog the end")
	input := make([]any, len(words))
	for i, w := range words {
		input[i] = w
	}
	weirtest.ExactlyOnce(t, weirtest.Case{
		Code: externalWordCount(), GroupBy: []string{"word"}, Input: weirtest.Rows("word", input...),
		ExternalStates: []*externalstate.Table{wordTotals},
	}, 1, 2, 3, 4, 5)
}

// TestExternalStateDifferenceCaught proves the table comparison can fail:
// code that writes its epoch's timestamp (which differs when faults cost
// extra epochs) leaves other rows after a faulty run, though its outputs
// are the same.
func TestExternalStateDifferenceCaught(t *testing.T) {
	tbl := weir.NewExternalState(wordTotals.Name)
	code := weir.Transform(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		w := m.Payload["word"].(string)
		if err := tbl.Put(ctx, weir.Row{"word": w, "n": int64(ctx.Now())}); err != nil {
			return err
		}
		return out.Add("out", weir.Row{"word": w})
	})
	ft := &fakeT{TB: t}
	weirtest.ExactlyOnce(ft, weirtest.Case{Code: code, GroupBy: []string{"word"}, Input: weirtest.Rows("word", "a", "b", "c", "d", "e", "f"),
		ExternalStates: []*externalstate.Table{wordTotals}}, 1, 2, 3, 4, 5)
	if !ft.failed {
		t.Fatal("rows written from the epoch timestamp matched a run without faults under every seed")
	}
}
