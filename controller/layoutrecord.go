package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
)

// layoutKey is the flow_state row of the layout record.
const layoutKey = "layout"

// LayoutRecord is the persisted layout of a pipeline's keyed computations
// (the flow_state row "layout", JSON). It is written by the engine when a
// run starts with another partition_count, by Rescale, and by the
// controller in the one commit that switches a computation to its new
// count (rescale.go). A store without the row predates rescaling: its
// layout is the last run's static spec.
type LayoutRecord struct {
	// Counts is the partition count every job of the computation runs
	// under now: the layout its outputs were routed by.
	Counts plan.Layout `json:"counts"`
	// Spec is the spec's partition_count when the count was last set, so
	// that a run started with the same spec keeps a count an operator set
	// with 'weir pipeline rescale', and a run whose spec changed the
	// count rescales to it.
	Spec plan.Layout `json:"spec"`
	// Targets are rescales asked for and not yet committed: a controller
	// that takes over carries them out.
	Targets plan.Layout `json:"targets,omitempty"`
}

func (r LayoutRecord) clone() LayoutRecord {
	return LayoutRecord{Counts: maps.Clone(r.Counts), Spec: maps.Clone(r.Spec), Targets: maps.Clone(r.Targets)}
}

// LoadLayout reads the layout record (ok false: none was written).
func LoadLayout(ctx context.Context, st store.Store) (rec LayoutRecord, ok bool, err error) {
	v, ok, err := st.Get(ctx, store.FlowState, []byte(layoutKey))
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("controller: read the layout: %w", err)
		}
		return LayoutRecord{}, false, err
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return LayoutRecord{}, false, fmt.Errorf("controller: the stored layout (flow_state %q) is not readable: %w", layoutKey, err)
	}
	return rec, true, nil
}

// Put adds the record's write to txn.
func (r LayoutRecord) Put(txn *store.Txn) {
	v, err := json.Marshal(r)
	if err != nil {
		panic(err) // maps of strings to ints always encode
	}
	txn.Put(store.FlowState, []byte(layoutKey), v)
}

// Reconcile decides a run's layout from the stored record (ok: there is
// one), the counts of the last run's static spec (prev, for a store
// without a record; nil if none), the spec's counts and whether the
// pipeline is drained (stopped, completed, or never ran), where nothing is
// in flight and a count may change at once. It returns the record to run
// with: its Counts are the plan's, its Targets the rescales to carry out
// live. changed reports that it differs from what is stored.
func Reconcile(stored LayoutRecord, ok bool, prev, spec plan.Layout, drained bool) (rec LayoutRecord, changed bool) {
	rec = LayoutRecord{Counts: plan.Layout{}, Spec: plan.Layout{}, Targets: plan.Layout{}}
	for name, want := range spec {
		cur, had := stored.Counts[name]
		setBy := stored.Spec[name]
		if !ok {
			cur, had = prev[name]
			setBy = cur
		}
		target, asked := stored.Targets[name]
		switch {
		case !had || drained:
			// New, or nothing in flight: the count changes at once. An
			// operator's rescale is kept while the spec is unchanged.
			if had && setBy == want {
				want = cur
				if asked {
					want = target
				}
			}
			rec.Counts[name] = want
		case setBy != want:
			rec.Counts[name], rec.Targets[name] = cur, want // the spec changed it
		default:
			rec.Counts[name] = cur
			if asked {
				rec.Targets[name] = target
			}
		}
		rec.Spec[name] = spec[name]
		if rec.Targets[name] == rec.Counts[name] {
			delete(rec.Targets, name)
		}
	}
	changed = !ok || !maps.Equal(rec.Counts, stored.Counts) || !maps.Equal(rec.Spec, stored.Spec) || !maps.Equal(rec.Targets, stored.Targets)
	if len(rec.Targets) == 0 {
		rec.Targets = nil
	}
	return rec, changed
}
