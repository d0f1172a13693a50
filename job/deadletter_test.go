package job

// Tests of deadletter.go: with a dead-letter stream, a failing call is
// undone and its messages go to the stream, committed with the epoch; the
// other messages of the epoch are processed as usual.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// deadLetterJob is poisonJob with a dead-letter stream "dead": it runs
// epochs until the input is consumed and returns the job, the store and
// the committed outbox by stream.
func deadLetterJob(t *testing.T, code weir.Computation, source bool, rows ...weir.Row) (*Job, store.Store, map[string][]*weir.Message) {
	t.Helper()
	ctx := context.Background()
	a := &plan.CompPlan{Code: code, Outputs: []string{"s", "dead"}, DeadLetterStream: "dead"}
	// Readers of both streams, so that outputs stay in the outbox: the
	// dead-letter stream's reader groups by a column every dead letter has.
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	j, st := startPoisonJob(t, a, source, map[string]*plan.CompPlan{
		"B": {Code: noop, GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"s"}},
		"C": {Code: noop, GroupBy: []string{"computation"}, Partitions: 1, Inputs: []string{"dead"}},
	}, rows...)
	spec := j.cfg.Partition
	for i := 0; i < 3; i++ {
		if _, err := j.Epoch(ctx); err != nil {
			t.Fatalf("epoch %d: %v", i, err)
		}
	}
	out := map[string][]*weir.Message{}
	p := tables.OutboxPrefix(string(spec.ID))
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.OutputMessages, Lo: p, Hi: tables.PrefixEnd(p)}, func(k, v []byte) bool {
		m, err := tables.DecodeMessage(msgid.ID(k[len(p):]), v)
		if err != nil {
			derr = err
			return false
		}
		out[m.Stream] = append(out[m.Stream], m)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		t.Fatal(err)
	}
	return j, st, out
}

// countState is a per-key count kept by the failing code below.
var countState = weir.NewState[int64]("n")

// failOnPoison counts each key's messages in state and emits the count; on
// a row with "poison" it first changes state, emits and sets a timer, then
// fails in the way the row's "poison" value names — all of which must be
// undone.
func failOnPoison(ctx weir.Context, m *weir.Message, out weir.Output) error {
	n, err := countState.Get(ctx)
	if err != nil {
		return err
	}
	countState.Set(ctx, n+1)
	if err := out.Add("s", weir.Row{"key": m.Payload["key"], "n": n + 1}); err != nil {
		return err
	}
	switch m.Payload["poison"] {
	case "error":
		return errors.New("cannot handle this row")
	case "panic":
		var rows []weir.Row
		_ = rows[3]
	case "unsupported":
		return out.Add("s", weir.Row{"key": m.Payload["key"], "when": time.Now()})
	}
	return nil
}

// TestDeadLetterUndoesTheFailedCall: each poison message, whatever its
// failure, becomes one dead-letter row naming it, its error and its
// payload; its call's output and state change are undone (the key's later
// message counts from the state before the poison one); the other messages
// are processed.
func TestDeadLetterUndoesTheFailedCall(t *testing.T) {
	j, _, out := deadLetterJob(t, weir.Transform(failOnPoison), false,
		weir.Row{"key": "a"}, weir.Row{"key": "a", "poison": "error"}, weir.Row{"key": "a"},
		weir.Row{"key": "b", "poison": "panic"}, weir.Row{"key": "b"},
		weir.Row{"key": "c", "poison": "unsupported"})
	got := map[string][]int64{}
	for _, m := range out["s"] {
		got[m.Payload["key"].(string)] = append(got[m.Payload["key"].(string)], m.Payload["n"].(int64))
	}
	if len(got["a"]) != 2 || got["a"][0] != 1 || got["a"][1] != 2 || len(got["b"]) != 1 || got["b"][0] != 1 || len(got["c"]) != 0 {
		t.Fatalf("outputs %v: want a [1 2], b [1], c none (the failed calls undone)", got)
	}
	dead := out["dead"]
	if len(dead) != 3 {
		t.Fatalf("%d dead-letter rows, want 3: %v", len(dead), dead)
	}
	why := map[string]string{}
	for _, m := range dead {
		p := m.Payload
		payload, _ := p["payload"].(map[string]any)
		why[payload["poison"].(string)] = p["error"].(string)
		if p["computation"] != "A" || p["stream"] != "in" || p["message_id"] == "" || p["partition"] != string(j.cfg.Partition.ID) {
			t.Errorf("dead-letter row %v lacks its origin", p)
		}
	}
	for poison, want := range map[string]string{"error": "cannot handle this row", "panic": "index out of range", "unsupported": "time.Time"} {
		if !strings.Contains(why[poison], want) {
			t.Errorf("dead letter of the %s row says %q, want %q", poison, why[poison], want)
		}
	}
	if j.deadLettered != 3 {
		t.Errorf("deadLettered = %d, want 3", j.deadLettered)
	}
}

// TestDeadLetterSourceRowNamesOffset: a source row's dead letter names the
// source, its partition and the offset, and the position moves past it.
func TestDeadLetterSourceRowNamesOffset(t *testing.T) {
	rows := []weir.Row{{"key": "a"}, {"key": "b", "poison": "error"}, {"key": "c"}}
	_, st, out := deadLetterJob(t, weir.Transform(failOnPoison), true, rows...)
	if len(out["dead"]) != 1 || len(out["s"]) != 2 {
		t.Fatalf("outputs %d, dead letters %d: want 2 and 1", len(out["s"]), len(out["dead"]))
	}
	p := out["dead"][0].Payload
	if p["source"] != "events" || p["source_partition"] != "p0" || p["offset"] != int64(1) {
		t.Fatalf("dead letter %v, want source events, partition p0, offset 1", p)
	}
	if off := committedOffset(t, st, plan.SourcePartitionID("A", "p0")); off != 3 {
		t.Fatalf("committed source offset %d, want 3 (past the dead-lettered row)", off)
	}
}

// committedOffset reads a source partition's committed position (the
// partition_states row "<partition>\x00source": a version byte, then the
// offset as a uvarint; see source.go).
func committedOffset(t *testing.T, st store.Store, part transport.PartitionID) uint64 {
	t.Helper()
	v, ok, err := st.Get(context.Background(), store.PartitionStates, []byte(string(part)+"\x00source"))
	if err != nil || !ok || len(v) == 0 || v[0] != 1 {
		t.Fatalf("source position of %s: %q %v %v", part, v, ok, err)
	}
	off, _, err := codec.Uvarint(v[1:])
	if err != nil {
		t.Fatal(err)
	}
	return off
}
