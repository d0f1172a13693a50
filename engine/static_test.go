package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// TestStaticSpecChangeNeedsStop (issue 11, scenario 6): a spec whose
// static part differs from the last run's (here
// experimental_enable_non_uint_key, which changes no result; a
// partition_count is a rescale, not refused) is refused, naming the field,
// while the pipeline is not drained; tunables
// may change; once the old spec drained the pipeline to stopped, the new
// spec runs and every count is exact.
func TestStaticSpecChangeNeedsStop(t *testing.T) {
	f := newFixture(t, 3)
	f.writeKeys(t, 3000, 30, 9)
	infinite := func() *spec.Pipeline {
		p := example(t, "counter")
		p.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = false
		p.Computations["Reader"].MaxRowsPerBatch = 20
		return p
	}
	newEngine := func(p *spec.Pipeline) (*Engine, error) {
		return New(context.Background(), Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
	}

	// A run interrupted while working (a kill).
	e, err := newEngine(infinite())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runUntil(t, ctx, e, "some input counted", func(s Status) bool { return s.Computations["Counter"].Inputs > 0 })
	cancel()
	if state := <-done; state != controller.Working {
		t.Fatalf("interrupted run ended in %s, want working", state)
	}

	changed := infinite()
	changed.Computations["Counter"].PartitionCount = 8
	changed.Computations["Counter"].ExperimentalEnableNonUintKey = true
	_, err = newEngine(changed)
	var sce *StaticChangeError
	if !errors.As(err, &sce) {
		t.Fatalf("a changed experimental_enable_non_uint_key of a working pipeline: err = %v, want a StaticChangeError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "computations.Counter.experimental_enable_non_uint_key") || !strings.Contains(msg, "target_state = stopped") {
		t.Errorf("error does not name the field and the way out:\n%s", msg)
	}
	partitions := false
	for _, c := range sce.Changes {
		partitions = partitions || spec.IsPartitionCount(c.Path)
	}
	if partitions || len(sce.Changes) == 0 || sce.State != controller.Working {
		t.Errorf("changes %v in state %s, want experimental_enable_non_uint_key and what it implies, not partition_count (a rescale), working", sce.Changes, sce.State)
	}

	// Tunables may change at any time.
	tuned := infinite()
	tuned.Computations["Counter"].MaxRowsPerBatch = 7
	tuned.Computations["Counter"].OutputStoreCountLimit = 50
	tuned.Dynamic.LeaseTimeout = spec.Duration(7 * time.Second)
	if _, err := newEngine(tuned); err != nil {
		t.Fatalf("a tunable change was refused: %v", err)
	}

	// Drain with the old spec, then the new one runs.
	stop := infinite()
	stop.Dynamic.TargetState = spec.StateStopped
	e, err = newEngine(stop)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if state, err := e.Run(ctx); err != nil || state != controller.Stopped {
		t.Fatalf("drain ended in %s: %v", state, err)
	}
	marks := func() bool {
		_, ok, err := f.st.Get(context.Background(), store.FlowState, []byte("published_watermarks"))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !marks() {
		t.Fatal("no published watermarks persisted by the runs")
	}
	changed.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = true
	if _, err := newEngine(changed); err != nil {
		t.Fatalf("the static change of a stopped pipeline was refused: %v", err)
	}
	if marks() {
		t.Error("the published watermarks of the old spec survived an accepted static change")
	}
	f.run(t, changed, nil)
	f.checkExactlyOnce(t)
}
