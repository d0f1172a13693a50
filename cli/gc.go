package cli

import "runtime/debug"

// defaultGCPercent is the garbage collector's heap growth target the weir
// command runs with unless the environment sets GOGC. Go's default (100)
// spent a quarter of the exactly-once counter's CPU in the collector; 200
// took 12% off its CPU per message for ~50 MiB more peak RSS (221 MiB for
// the bench's exactly_once row, within the 256 MiB goal), measured with
// 'weir bench' (docs/performance.md). 400 gained little more and passed
// 350 MiB. GOMEMLIMIT, if set, still bounds the heap.
const defaultGCPercent = 200

// tuneGC applies defaultGCPercent when GOGC is unset (getenv is os.Getenv;
// injected for tests). It returns the percent in effect, or -1 if GOGC
// decides.
func tuneGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		return -1
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
