package cli

import (
	"runtime"
	"testing"
)

// TestPeakRSSReset: after resetPeakRSS the reported peak is the process's
// peak since then, not the larger one before it (the bench's RSS column
// would otherwise carry the setup's memory).
func TestPeakRSSReset(t *testing.T) {
	big := make([]byte, 256<<20)
	for i := range big {
		big[i] = 1 // touch every page
	}
	before := peakRSSMiB()
	if before < 256 {
		t.Fatalf("peak RSS %.0f MiB with 256 MiB touched: VmHWM not read", before)
	}
	runtime.KeepAlive(big)
	if !resetPeakRSS() {
		t.Skip("this kernel does not let a process reset its peak RSS (/proc/self/clear_refs)")
	}
	if after := peakRSSMiB(); after > before-128 {
		t.Fatalf("peak RSS after the reset %.0f MiB, before %.0f MiB: the 256 MiB freed before the reset still counted", after, before)
	}
}
