// Package weirtest runs a user's computation through weir's exactly-once
// machinery in a test: a finite source feeds the computation, a collecting
// sink records what it committed, and the whole engine — controller, jobs,
// transport, store (Pebble in memory) — runs on the test's goroutine with a
// manual clock. A run with faults crashes jobs at every named point of the
// epoch, loses acknowledgements, lets commits with an unknown outcome land
// late and restarts workers, all drawn from a seed; ExactlyOnce checks that
// such runs commit exactly what a run without faults commits.
//
// It is to weir what franz-go's kfake is to Kafka clients: the real engine,
// small enough for a unit test. A typical test:
//
//	func TestWordCount(t *testing.T) {
//		weirtest.ExactlyOnce(t, weirtest.Case{
//			Code:    wordCount(),               // a weir.Transform emitting on "out"
//			GroupBy: []string{"word"},
//			Input:   weirtest.Rows("word", "a", "b", "a"),
//		}, 1, 2, 3)                                 // three seeds of faults
//	}
//
// The computation reads the input rows (each message's Payload is a row)
// and emits on the stream "out"; every output row is collected. A SwiftMap
// must be deterministic and may not use state; a Transform may use state
// (weir.State). Timers are not supported here.
package weirtest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/sim"
)

// Case is one computation under test.
type Case struct {
	// Code is the computation (weir.Transform, weir.SwiftMap or a
	// weir.Computation with OnMessages).
	Code weir.Computation
	// GroupBy are its key columns (default: "key").
	GroupBy []string
	// Partitions is its partition count (default 2).
	Partitions int
	// Input maps source partitions to their rows (Rows builds one
	// partition).
	Input map[string][]weir.Row
	// BatchRows bounds each epoch's batch (default 3: small batches make
	// more epochs, and more places to crash).
	BatchRows int
	// ExternalStates declares the external state tables the computation
	// reads and writes (weir.ExternalState); ExactlyOnce compares their
	// final rows too.
	ExternalStates []*externalstate.Table
}

// Rows builds a single source partition whose rows have one column.
func Rows(column string, values ...any) map[string][]weir.Row {
	rows := make([]weir.Row, len(values))
	for i, v := range values {
		rows[i] = weir.Row{column: v}
	}
	return map[string][]weir.Row{"p0": rows}
}

func (c Case) options(seed uint64) sim.Options {
	code := c.Code
	o := sim.Options{Rows: c.Input, Code: &code, GroupBy: c.GroupBy, Counters: c.Partitions, BatchRows: c.BatchRows, Seed: seed,
		ExternalStates: c.ExternalStates}
	if o.Counters == 0 {
		o.Counters = 2
	}
	if o.BatchRows == 0 {
		o.BatchRows = 3
	}
	return o
}

// Run runs the case without faults until the finite input is processed
// and returns the committed output rows, in commit order.
func Run(t testing.TB, c Case) []weir.Row {
	t.Helper()
	s := newSim(t, c.options(0))
	if !s.Run(5000, s.Completed) {
		t.Fatalf("weirtest: the pipeline did not complete:\n%s", tail(s.Trace()))
	}
	return outputs(t, s)
}

// RunWithFaults runs the case under the faults seed draws and returns the
// committed output rows. The same seed gives the same run.
func RunWithFaults(t testing.TB, c Case, seed uint64) []weir.Row {
	t.Helper()
	s := newSim(t, c.options(seed))
	trace, err := s.RandomRun(seed, 400)
	if err != nil {
		t.Fatalf("weirtest: seed %d: %v\n%s", seed, err, tail(trace))
	}
	return outputs(t, s)
}

// ExactlyOnce runs the case without faults and then under each seed's
// faults, and fails the test unless every faulty run committed exactly the
// same output rows (as a multiset: the order of outputs of different keys
// may differ between runs) and left the same rows in every external state
// table. For a deterministic computation this is the exactly-once promise:
// nothing lost, nothing twice.
func ExactlyOnce(t testing.TB, c Case, seeds ...uint64) {
	t.Helper()
	clean := newSim(t, c.options(0))
	if !clean.Run(5000, clean.Completed) {
		t.Fatalf("weirtest: the pipeline did not complete:\n%s", tail(clean.Trace()))
	}
	want, wantTables := canonical(t, outputs(t, clean)), tableRows(t, clean, c)
	for _, seed := range seeds {
		s := newSim(t, c.options(seed))
		if trace, err := s.RandomRun(seed, 400); err != nil {
			t.Fatalf("weirtest: seed %d: %v\n%s", seed, err, tail(trace))
		}
		if got := canonical(t, outputs(t, s)); !slices.Equal(got, want) {
			t.Errorf("weirtest: seed %d: committed outputs differ from a run without faults:\n%s", seed, diff(want, got))
		}
		if got := tableRows(t, s, c); !slices.Equal(got, wantTables) {
			t.Errorf("weirtest: seed %d: external state rows differ from a run without faults:\n%s", seed, diff(wantTables, got))
		}
	}
}

// tableRows lists the rows of c's external state tables as "table row"
// strings, in table and key order.
func tableRows(t testing.TB, s *sim.Sim, c Case) []string {
	t.Helper()
	var out []string
	for _, tb := range c.ExternalStates {
		err := externalstate.Scan(context.Background(), s.Store, tb.Name, nil, nil, 0, func(_ []byte, r map[string]any) (bool, error) {
			b, err := codec.AppendRowJSON(nil, r)
			out = append(out, tb.Name+" "+string(b))
			return err == nil, err
		})
		if err != nil {
			t.Fatalf("weirtest: read %s: %v", tb.Name, err)
		}
	}
	return out
}

func newSim(t testing.TB, o sim.Options) *sim.Sim {
	t.Helper()
	s, err := sim.New(o)
	if err != nil {
		t.Fatalf("weirtest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func outputs(t testing.TB, s *sim.Sim) []weir.Row {
	t.Helper()
	rows, err := s.Outputs()
	if err != nil {
		t.Fatalf("weirtest: read outputs: %v", err)
	}
	return rows
}

// canonical encodes rows as sorted strings (a multiset).
func canonical(t testing.TB, rows []weir.Row) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		b, err := codec.AppendRowJSON(nil, r)
		if err != nil {
			t.Fatalf("weirtest: %v", err)
		}
		out[i] = string(b)
	}
	sort.Strings(out)
	return out
}

// diff lists the rows missing from got and the rows got has in excess.
func diff(want, got []string) string {
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	keys := make([]string, 0, len(count))
	for k, n := range count {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		if n := count[k]; n > 0 {
			out += fmt.Sprintf("  lost %d× %s\n", n, k)
		} else {
			out += fmt.Sprintf("  extra %d× %s\n", -n, k)
		}
	}
	return out
}

func tail(trace string) string {
	if len(trace) > 4000 {
		return "…" + trace[len(trace)-4000:]
	}
	return trace
}
