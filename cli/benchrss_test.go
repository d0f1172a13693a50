package cli

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
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

// TestAnonSampler: the sampler's peak covers anonymous memory touched
// while it runs and freed before it stops, and not the binary's file; a
// sampler left running by a failed case is stopped by the next one.
func TestAnonSampler(t *testing.T) {
	base := rssAnonMiB()
	if base <= 0 {
		t.Fatal("RssAnon not read from /proc/self/status")
	}
	s := startAnonSampler()
	big := make([]byte, 128<<20)
	for i := range big {
		big[i] = 1
	}
	time.Sleep(50 * time.Millisecond) // a few samples with it resident
	runtime.KeepAlive(big)
	big = nil
	debug.FreeOSMemory()
	if peak := s.stop(); peak < base+100 {
		t.Fatalf("peak %.0f MiB with 128 MiB touched above %.0f MiB", peak, base)
	}
	left := startAnonSampler()
	next := startAnonSampler()
	select {
	case <-left.stopc:
	default:
		t.Fatal("a new sampler left the running one sampling")
	}
	if next.stop() <= 0 {
		t.Fatal("the next sampler did not sample")
	}
}
