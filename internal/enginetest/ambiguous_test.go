package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-stream/weir/store"
)

// TestAmbiguousCommits makes epoch commits ambiguous — some applied with the
// acknowledgement lost, some never applied — and checks that each job
// resolves the outcome through its partition_transactions row instead of
// guessing: an applied epoch is not applied again, a lost one is retried,
// and the output is exact.
func TestAmbiguousCommits(t *testing.T) {
	ctx := context.Background()
	var fs *FaultStore
	h := New(t, Options{Seed: 8, Messages: 800, Wrap: func(st store.Store) store.Store {
		fs = NewFaultStore(st, 2)
		fs.InjectAmbiguous(0.15, 60)
		return fs
	}})
	if err := h.RunToCompletion(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if fs.AmbiguousApplied == 0 || fs.AmbiguousLost == 0 {
		t.Fatalf("injected %d applied and %d lost ambiguous commits; need both kinds", fs.AmbiguousApplied, fs.AmbiguousLost)
	}
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if st := h.Ctl.Stats(); st.JobsFailed > 0 {
		t.Errorf("%d jobs failed; ambiguous commits must be resolved in place:\n%s", st.JobsFailed, h.Logs())
	}
	t.Logf("ambiguous commits: %d applied, %d lost; controller %+v", fs.AmbiguousApplied, fs.AmbiguousLost, h.Ctl.Stats())
}
