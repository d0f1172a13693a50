package job

// Tests of recover.go: a failing user-code call fails its epoch (nothing
// committed) with a *UserCodeError naming the input, a panic included;
// weir's own invariant violations are not recovered.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// poisonJob runs one epoch of a job of computation "A" running code: a
// keyed computation fed rows (offered through the hub), or, with source, a
// source computation reading rows from source partition "p0". It returns
// the store, the job's partition and the epoch's error.
func poisonJob(t *testing.T, code weir.Computation, source bool, rows ...weir.Row) (store.Store, transport.PartitionID, error) {
	t.Helper()
	a := &plan.CompPlan{Code: code, Outputs: []string{"s"}}
	j, st := startPoisonJob(t, a, source, nil, rows...)
	_, err := j.Epoch(context.Background())
	return st, j.cfg.Partition.ID, err
}

// startPoisonJob starts a job of computation "A" (a, given its code and
// outputs) over a fresh store, with the other computations of others: a
// keyed computation fed rows (offered through the hub), or, with source, a
// source computation reading rows from source partition "p0".
func startPoisonJob(t *testing.T, a *plan.CompPlan, source bool, others map[string]*plan.CompPlan, rows ...weir.Row) (*Job, store.Store) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	a.Batch = plan.BatchPlan{MaxRows: 100, MaxBytes: 1 << 20}
	spec := plan.PartitionSpec{ID: plan.KeyedPartitionID("A", 0), ToEnd: true}
	if source {
		a.Source, a.SourceStream = testconn.NewSource(map[string][]weir.Row{"p0": rows}), "events"
		spec = plan.PartitionSpec{ID: plan.SourcePartitionID("A", "p0"), SourceKey: "p0"}
	} else {
		a.GroupBy, a.Partitions, a.Inputs = []string{"key"}, 1, []string{"in"}
	}
	hub := transport.NewHub(0)
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{"A": a}}
	for name, c := range others {
		pl.Computations[name] = c
	}
	j := startTestJob(t, st, hub, pl, "A", spec)
	if !source {
		ts, _ := st.Timestamp(ctx)
		for i, r := range rows {
			offerInput(hub, spec.ID, &weir.Message{ID: msgid.Ordered(uint64(ts), "in", uint64(i)), Stream: "in",
				SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: r})
		}
	}
	return j, st
}

// explode panics on a row with "poison" set and copies the others.
func explode(_ weir.Context, m *weir.Message, out weir.Output) error {
	if m.Payload["poison"] == true {
		var rows []weir.Row
		_ = rows[3] // index out of range: a runtime panic in user code
	}
	return out.Add("s", m.Payload)
}

// TestUserPanicFailsTheEpoch: a panic in user code does not kill the
// process; the epoch fails with a *UserCodeError naming the computation,
// the partition, the message and the panic, with the user code's frames;
// nothing is committed.
func TestUserPanicFailsTheEpoch(t *testing.T) {
	st, part, err := poisonJob(t, weir.Transform(explode), false,
		weir.Row{"key": "a"}, weir.Row{"key": "b", "poison": true})
	var u *UserCodeError
	if !errors.As(err, &u) {
		t.Fatalf("epoch error %v (%T), want a *UserCodeError", err, err)
	}
	t.Logf("the error reads:\n%v", err)
	want := msgid.ID(fmt.Sprintf("%s-in:%s", string(u.Messages[0])[:16], msgid.Lex(1)))
	if u.Computation != "A" || u.Partition != part || len(u.Messages) != 1 || u.Messages[0] != want || u.Panic == nil {
		t.Fatalf("error fields %+v, want computation A, partition %s, message %s, a panic value", u, part, want)
	}
	for _, w := range []string{"computation A", "partition " + string(part), "message " + string(want), "panic: runtime error: index out of range", "job.explode"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	if len(u.Stack) == 0 || !strings.Contains(u.Stack[0], "job.explode") || !strings.Contains(u.Stack[0], "recover_test.go") {
		t.Errorf("stack %q does not start at the panicking user function", u.Stack)
	}
	if n, _, err := countOutbox(context.Background(), st, part); err != nil || n != 0 {
		t.Fatalf("outbox holds %d rows (%v): the failed epoch committed", n, err)
	}
}

// TestSourcePoisonNamesOffset: a failure on a source message names the
// source partition and the record's offset; a returned error is kept
// (errors.Is) and the key batch of a per-batch function is named.
func TestSourcePoisonNamesOffset(t *testing.T) {
	rows := []weir.Row{{"key": "a"}, {"key": "b"}, {"key": "c", "poison": true}, {"key": "d"}}
	_, _, err := poisonJob(t, weir.Transform(explode), true, rows...)
	var u *UserCodeError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "(source events, partition p0, offset 2)") {
		t.Fatalf("epoch error %v, want the source partition and offset 2", err)
	}

	errBad := errors.New("bad row")
	batch := weir.Computation{Kind: weir.KindTransform, OnMessages: func(_ weir.Context, msgs []*weir.Message, _ weir.Output) error {
		return fmt.Errorf("rejecting %d rows: %w", len(msgs), errBad)
	}}
	_, _, err = poisonJob(t, batch, true, rows...)
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), "key batch of 4 messages") || !strings.Contains(err.Error(), "(source events, partition p0, offsets 0 … 3)") {
		t.Fatalf("epoch error %v, want the key batch with offsets 0 … 3 wrapping errBad", err)
	}
}

// TestRefusedOutputFailsEvenIfIgnored: an output on an undeclared stream
// fails the call even when the code drops Add's error (the output would be
// lost silently otherwise).
func TestRefusedOutputFailsEvenIfIgnored(t *testing.T) {
	stray := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		_ = out.Add("nowhere", m.Payload)
		return nil
	})
	_, _, err := poisonJob(t, stray, false, weir.Row{"key": "a"})
	var u *UserCodeError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), `no output stream "nowhere"`) {
		t.Fatalf("epoch error %v, want a refused output", err)
	}
}

// TestInvariantPanicsAreNotRecovered: a weir invariant violation raised
// during a user-code call (through the engine's own code) still panics: it
// is a bug in weir, not the user's.
func TestInvariantPanicsAreNotRecovered(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariant checks are compiled in only with -race or -tags invariants")
	}
	violate := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error {
		invariants.Check(false, "test violation")
		return nil
	})
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "test violation") {
			t.Fatalf("recovered %v, want the invariant violation to propagate", r)
		}
	}()
	_, _, err := poisonJob(t, violate, false, weir.Row{"key": "a"})
	t.Fatalf("the epoch returned %v instead of panicking", err)
}
