package cli

import "runtime/debug"

// defaultGCPercent is the garbage collector's heap growth target the weir
// command runs with unless the environment sets GOGC. With Go's default
// (100) the collector took a sixth to a quarter of the exactly-once
// counter's CPU. Measured with 'weir bench --rows exactly_once' (medians
// of 3, one sitting, quiet machine): GOGC=100 9.65 CPU s per million
// messages and 206 MiB peak RSS; 150: 9.03 and 218 MiB; 200: 8.52 but
// 265–279 MiB, above the 256 MiB goal for the default example
// (docs/performance.md). GOMEMLIMIT, if set, still bounds the heap.
const defaultGCPercent = 150

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
