package enginetest

import (
	"context"
	"testing"
	"time"
)

// TestCounterExactlyOnce runs the keyed counter pipeline without faults
// and checks the exactly-once oracle, for both reader kinds and both dedup
// layouts.
func TestCounterExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"transform-source", Options{}},
		{"swift-source", Options{SwiftReader: true}},
		{"compact-dedup", Options{Compact: true}},
		{"swift-relay", Options{SwiftReader: true, ExtraStage: true}},
		// A state cache smaller than one state: every epoch reads its keys
		// back from the store.
		{"tiny-state-cache", Options{Keys: 200, StateCacheBytes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := New(t, tc.o)
			if err := h.RunToCompletion(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			bad, err := h.CheckExactlyOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}
