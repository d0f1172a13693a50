package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// staticSpecKey is the flow_state row holding the canonical static spec
// (spec.StaticSpec) of the last run.
const staticSpecKey = "static_spec"

// StaticChangeError refuses a static spec change of a pipeline that is not
// drained: data in flight was laid out by the old static spec (outbox rows
// addressed to partitions, timers and dedup rows under ids) and would be
// orphaned or misread.
type StaticChangeError struct {
	State   controller.State
	Changes []spec.Change
}

func (e *StaticChangeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: the spec changes static fields of a pipeline that is %s, not stopped (drained):", e.State)
	for _, c := range e.Changes {
		fmt.Fprintf(&b, "\n  %s", c)
	}
	b.WriteString("\nstatic fields may change only once the pipeline is stopped, or in-flight data is lost." +
		"\nDrain it first with the old spec: run it with dynamic_spec.target_state = stopped (or 'weir pipeline stop'" +
		" while it runs) and wait for state stopped; then run the new spec." +
		"\nTunables (batch sizes, limits, periods, dynamic_spec) may change at any time.")
	return b.String()
}

// checkStaticSpec compares p's static spec with the one persisted by the
// last run and persists p's. A change is refused unless the persisted
// pipeline state is stopped or completed (drained), or the pipeline never
// ran (no state persisted) or predates static-spec persistence. An
// accepted change also forgets the published watermarks of the old spec
// (controller.ForgetWatermarks).
func checkStaticSpec(ctx context.Context, st store.Store, p *spec.Pipeline) error {
	next := p.Static()
	v, ok, err := st.Get(ctx, store.FlowState, []byte(staticSpecKey))
	if err != nil {
		return fmt.Errorf("engine: read the stored static spec: %w", err)
	}
	if ok {
		prev, err := spec.DecodeStatic(v)
		if err != nil {
			return err
		}
		changes := prev.Diff(next)
		if len(changes) == 0 {
			return nil
		}
		state, known, err := controller.LoadState(ctx, st)
		if err != nil {
			return err
		}
		if known && state != controller.Stopped && state != controller.Completed {
			return &StaticChangeError{State: state, Changes: changes}
		}
	}
	txn := store.NewTxn()
	if ok {
		controller.ForgetWatermarks(txn)
	}
	txn.Put(store.FlowState, []byte(staticSpecKey), next.Encode())
	if err := st.Commit(ctx, txn); err != nil {
		return fmt.Errorf("engine: persist the static spec: %w", err)
	}
	return nil
}
