package cli

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: weir runs with GOGC=defaultGCPercent unless the environment
// sets GOGC.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	if got := tuneGC(func(string) string { return "" }); got != defaultGCPercent {
		t.Fatalf("tuneGC without GOGC = %d", got)
	}
	if cur := debug.SetGCPercent(100); cur != defaultGCPercent {
		t.Fatalf("GC percent %d after tuneGC, want %d", cur, defaultGCPercent)
	}
	if got := tuneGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] }); got != -1 {
		t.Fatalf("tuneGC with GOGC set = %d, want -1", got)
	}
	if cur := debug.SetGCPercent(100); cur != 100 {
		t.Fatalf("tuneGC changed the GC percent (%d) although GOGC was set", cur)
	}
}
