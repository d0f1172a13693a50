package builtin

import (
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/spec"
)

// KeyCountsTable is the external state table ExternalCounter writes. Declare
// it in the spec as
//
//	"external_states" = {"key_counts" = {
//	    "key_columns" = [{"name" = "key_hash"; "type" = "uint64"}; {"name" = "key"; "type" = "string"}];
//	    "value_columns" = [{"name" = "count"; "type" = "int64"}];
//	}};
//
// and list it under the computation's external_state_managers. key_hash is
// a hash of key (uniformly distributed), so a ServiceLogSource can cycle
// over the table.
const KeyCountsTable = "key_counts"

// KeyCountsDecl returns the declaration of key_counts, for plans built in
// code (a spec declares it as above).
func KeyCountsDecl() *externalstate.Table {
	return &externalstate.Table{Name: KeyCountsTable,
		Key:   []spec.Column{{Name: "key_hash", Type: spec.TypeUint64}, {Name: "key", Type: spec.TypeString}},
		Value: []spec.Column{{Name: "count", Type: spec.TypeInt64}}}
}

var keyCounts = weir.NewExternalState(KeyCountsTable)

// ExternalCounter is Counter with its counts in the external state table
// key_counts instead of weir.State (group it by "key"): for a row {"key":
// k} it increments k's row {key_hash, key, count} and emits {"key",
// "count"}; for a row {"key": k, "op": "delete"} it deletes k's row and
// emits nothing. The row's write commits with the epoch, so each input
// changes it exactly once.
func ExternalCounter() weir.Computation {
	c := weir.Transform(func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
		k, ok := msg.Payload["key"].(string)
		if !ok {
			return fmt.Errorf("ExternalCounter: message %s has no string column \"key\"", msg.ID)
		}
		h := codec.Hash64([]byte(k))
		if msg.Payload["op"] == "delete" {
			return keyCounts.Delete(ctx, h, k)
		}
		row, _, err := keyCounts.Get(ctx, h, k)
		if err != nil {
			return err
		}
		n, _ := row["count"].(int64)
		n++
		if err := keyCounts.Put(ctx, weir.Row{"key_hash": h, "key": k, "count": n}); err != nil {
			return err
		}
		if s := out.Streams(); len(s) > 0 {
			return out.Add(s[0], weir.Row{"key": k, "count": n})
		}
		return nil
	})
	c.Keyed = true
	c.ExternalStateWrites = []string{KeyCountsTable}
	return c
}

// digestTotals is Digest's per-partition running totals of the current
// cycle.
var digestTotals = weir.NewState[digestState]("digest")

type digestState struct {
	Cycle uint64 `json:"cycle"`
	Rows  int64  `json:"rows"`
	Total int64  `json:"total"`
}

// Digest reads a ServiceLogSource (a Transform: a service log may not feed
// a Swift computation) over a table with a "count" column, such as
// key_counts: for each row it emits {"key", "count", "cycle"}, and at each
// cycle-end marker (cycle_end_marker = %true) the cycle's digest of its
// partition, {"cycle", "cycle_end": true, "rows", "total", "partition"}:
// the rows seen and the sum of their counts, kept in state so that a
// restart in the middle of a cycle loses nothing of the sum.
func Digest() weir.Computation {
	return weir.Transform(func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
		stream, err := firstStream(out)
		if err != nil {
			return fmt.Errorf("Digest: %w", err)
		}
		cycle, _ := msg.Payload["$cycle"].(uint64)
		st, err := digestTotals.Get(ctx)
		if err != nil {
			return err
		}
		if st.Cycle != cycle {
			st = digestState{Cycle: cycle}
		}
		if msg.Payload["$cycle_end"] == true {
			digestTotals.Clear(ctx)
			return out.Add(stream, weir.Row{"cycle": cycle, "cycle_end": true, "rows": st.Rows, "total": st.Total, "partition": msg.Payload["$partition"]})
		}
		n, _ := msg.Payload["count"].(int64)
		st.Rows++
		st.Total += n
		digestTotals.Set(ctx, st)
		return out.Add(stream, weir.Row{"key": msg.Payload["key"], "count": n, "cycle": cycle})
	})
}
