package cli

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
)

// resetPeakRSS releases the memory the case's setup left behind (the
// generated input: garbage by now) to the OS and resets the kernel's peak
// RSS of this process (VmHWM, through /proc/self/clear_refs), so that
// peakRSSMiB measures the timed part only: what the engine or the loop
// needs, not what writing the input before the clock needed. It reports
// whether the reset worked (Linux only; otherwise the row keeps the whole
// process's peak).
func resetPeakRSS() bool {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSSMiB is this process's peak RSS since the last resetPeakRSS (VmHWM
// of /proc/self/status), or 0 if it cannot be read.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, err := strconv.ParseFloat(string(f[1]), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

// totalAlloc is the number of bytes this process has allocated on the Go
// heap so far (runtime.MemStats.TotalAlloc; reading it stops the world
// briefly, so it is read at the clock's start and stop only).
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}
