package plan

import (
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
)

// source is a connector.Source stub for plan-level tests: only its
// presence matters (IsSource).
type source struct{ connector.Source }

func code(kind weir.Kind) weir.Computation {
	return weir.Computation{Kind: kind, OnMessage: func(weir.Context, *weir.Message, weir.Output) error { return nil }}
}

// testPlan: Reader (a Swift source) → Relay (SwiftMap) → Counter
// (Transform) → Tail (SwiftMap).
func testPlan() *Plan {
	return &Plan{Computations: map[string]*CompPlan{
		"Reader":  {Name: "Reader", Code: code(weir.KindSwiftMap), Source: source{}, Outputs: []string{"words"}},
		"Relay":   {Name: "Relay", Code: code(weir.KindSwiftMap), Partitions: 2, Inputs: []string{"words"}, Outputs: []string{"relayed"}},
		"Counter": {Name: "Counter", Code: code(weir.KindTransform), Partitions: 4, Inputs: []string{"relayed"}, Outputs: []string{"counts"}},
		"Tail":    {Name: "Tail", Code: code(weir.KindSwiftMap), Partitions: 1, Inputs: []string{"counts"}},
	}}
}

// TestWithLayout: a computation whose count changes gets a copy with the
// new count; the others keep their *CompPlan (the controller compares
// them by pointer); the plan it was made from is unchanged; bad layouts are
// refused, naming the computation.
func TestWithLayout(t *testing.T) {
	p := testPlan()
	if got := p.Layout().String(); got != "Counter=4 Relay=2 Tail=1" {
		t.Fatalf("layout %q", got)
	}
	q, err := p.WithLayout(Layout{"Counter": 7, "Relay": 2})
	if err != nil {
		t.Fatal(err)
	}
	if q.Computations["Counter"].Partitions != 7 || p.Computations["Counter"].Partitions != 4 {
		t.Fatalf("Counter: %d in the new plan, %d in the old; want 7 and 4", q.Computations["Counter"].Partitions, p.Computations["Counter"].Partitions)
	}
	for _, name := range []string{"Reader", "Relay", "Tail"} {
		if q.Computations[name] != p.Computations[name] {
			t.Errorf("%s: a new *CompPlan for an unchanged count", name)
		}
	}
	if r := q.Receivers("relayed"); len(r) != 1 || r[0].Partitions != 7 {
		t.Errorf("the new plan's receivers of relayed: %v; want the Counter on 7", r)
	}
	for layout, want := range map[string]Layout{
		"reads a source": {"Reader": 3},
		"at least 1":     {"Counter": 0},
		"does not have":  {"Nope": 2},
	} {
		if _, err := p.WithLayout(want); err == nil || !strings.Contains(err.Error(), layout) {
			t.Errorf("WithLayout(%v): %v; want an error saying %q", want, err, layout)
		}
	}
}

// TestRescalable: sources and SwiftMaps cannot be rescaled live; a
// SwiftMap fed through SwiftMaps by a Swift source never (its replays), one
// fed by a Transform can change while drained.
func TestRescalable(t *testing.T) {
	p := testPlan()
	if p.Computations["Counter"].Rescalable() != nil {
		t.Error("a keyed Transform is not rescalable")
	}
	for _, name := range []string{"Reader", "Relay", "Tail"} {
		if p.Computations[name].Rescalable() == nil {
			t.Errorf("%s is rescalable live", name)
		}
	}
	if got := p.SwiftSourceUpstream(p.Computations["Relay"]); got != "Reader" {
		t.Errorf("Relay's Swift source: %q, want Reader", got)
	}
	if got := p.SwiftSourceUpstream(p.Computations["Tail"]); got != "" {
		t.Errorf("Tail (fed by the Counter, a Transform): Swift source %q, want none", got)
	}
	p.Computations["Reader"].Code = code(weir.KindTransform)
	if got := p.SwiftSourceUpstream(p.Computations["Relay"]); got != "" {
		t.Errorf("Relay fed by a Transform source: Swift source %q, want none", got)
	}
}
