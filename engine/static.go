package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/plan"
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
// last run, decides the run's layout (controller.Reconcile) and persists
// both in one commit: a static spec saying a new partition_count beside a
// layout record saying the old one is what a crash between two commits
// would leave, and a later run would then lay out by the wrong count. A
// static change is refused unless the persisted pipeline state is stopped
// or completed (drained), or the pipeline never ran (no state persisted)
// or predates static-spec persistence. partition_count of a keyed
// computation is not refused: it is a rescale, carried out at once when
// the pipeline is drained and live otherwise (controller/rescale.go) —
// except a SwiftMap's, which cannot be rescaled live (plan.Rescalable). An
// accepted static change also forgets the published watermarks of the old
// spec (controller.ForgetWatermarks). It returns the layout record the run
// starts with.
func checkStaticSpec(ctx context.Context, st store.Store, p *spec.Pipeline, pl *plan.Plan) (controller.LayoutRecord, error) {
	specLayout := pl.Layout()
	next := p.Static()
	v, ok, err := st.Get(ctx, store.FlowState, []byte(staticSpecKey))
	if err != nil {
		return controller.LayoutRecord{}, fmt.Errorf("engine: read the stored static spec: %w", err)
	}
	var prevCounts plan.Layout
	drained := true
	var changes []spec.Change
	var state controller.State
	if ok {
		prev, err := spec.DecodeStatic(v)
		if err != nil {
			return controller.LayoutRecord{}, err
		}
		prevCounts = prev.PartitionCounts()
		for _, c := range prev.Diff(next) {
			if !spec.IsPartitionCount(c.Path) {
				changes = append(changes, c)
			}
		}
		var known bool
		if state, known, err = controller.LoadState(ctx, st); err != nil {
			return controller.LayoutRecord{}, err
		}
		drained = !known || state == controller.Stopped || state == controller.Completed
		if len(changes) > 0 && !drained {
			return controller.LayoutRecord{}, &StaticChangeError{State: state, Changes: changes}
		}
	}
	stored, recorded, err := controller.LoadLayout(ctx, st)
	if err != nil {
		return controller.LayoutRecord{}, err
	}
	rec, layoutChanged := controller.Reconcile(stored, recorded, prevCounts, specLayout, drained)
	before := stored.Counts
	if !recorded {
		before = prevCounts
	}
	if err := refuseLayoutChange(pl, rec, before, state); err != nil {
		return controller.LayoutRecord{}, err
	}
	txn := store.NewTxn()
	if len(changes) > 0 {
		controller.ForgetWatermarks(txn)
	}
	staticChanged := !ok || !bytes.Equal(v, next.Encode())
	if staticChanged {
		txn.Put(store.FlowState, []byte(staticSpecKey), next.Encode())
	}
	if layoutChanged {
		rec.Put(txn)
	}
	if !staticChanged && !layoutChanged {
		return rec, nil
	}
	if err := st.Commit(ctx, txn); err != nil {
		return controller.LayoutRecord{}, fmt.Errorf("engine: persist the static spec and layout: %w", err)
	}
	return rec, nil
}

// refuseLayoutChange refuses the count changes the run's layout record rec
// makes (against before, the stored counts; nil: none stored) that cannot
// be carried out: a SwiftMap's live (a target) while the pipeline is
// state, not drained; and, drained or not, that of a SwiftMap fed through
// SwiftMaps by a Swift source (plan.SwiftSourceUpstream).
func refuseLayoutChange(pl *plan.Plan, rec controller.LayoutRecord, before plan.Layout, state controller.State) error {
	for name, n := range rec.Targets {
		if c, ok := pl.Computations[name]; ok && c.Rescalable() != nil {
			return &StaticChangeError{State: state, Changes: []spec.Change{{
				Path: "computations." + name + ".partition_count", Old: fmt.Sprint(rec.Counts[name]), New: fmt.Sprint(n)}}}
		}
	}
	for name, n := range rec.Counts {
		c, ok := pl.Computations[name]
		old, had := before[name]
		if !ok || !had || old == n {
			continue
		}
		if src := pl.SwiftSourceUpstream(c); src != "" {
			return fmt.Errorf("engine: computations.%s.partition_count: %d → %d is refused, drained or not: %s is a SwiftMap fed through SwiftMaps by the Swift source %s, "+
				"which replays after any restart what it read since its committed position, through %s's partitions again; with another count the replays would come from "+
				"partitions whose receivers' frontiers never saw them, and be processed twice. Keep partition_count %d, or make %s or %s a Transform (it keeps an outbox) and rescale then",
				name, old, n, name, src, name, old, name, src)
		}
	}
	return nil
}
