package cli

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
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
	kb, _ := procField(b, "VmHWM:")
	return kb / 1024
}

// procField is the number of field (e.g. "VmHWM:", in KiB, or "wchar:", in
// bytes) of a /proc text of "name: value" lines (/proc/PID/status,
// /proc/PID/io); ok is false if it has none.
func procField(text []byte, field string) (v float64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == field {
			v, err := strconv.ParseFloat(string(f[1]), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// totalAlloc is the number of bytes this process has allocated on the Go
// heap so far (runtime.MemStats.TotalAlloc; reading it stops the world
// briefly, so it is read at the clock's start and stop only).
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// anonSampler samples the process's anonymous resident memory (RssAnon of
// /proc/self/status: the Go heap, stacks, Pebble's memtables and cache)
// every 10 ms and keeps the peak. VmHWM also counts the pages of the
// binary's file that are mapped, and those vary between two builds of one
// commit by ~10 MiB (how the page cache holds each file), so two binaries'
// peak RSS compare only as well as their files do; their anonymous peaks
// compare as the engines' memory.
type anonSampler struct {
	stopc chan struct{}
	done  chan float64
}

// sampling is the sampler of the case running now (cases run one at a
// time), so that runBenchCase ends it when a case fails before its clock
// stops.
var sampling *anonSampler

func startAnonSampler() *anonSampler {
	stopAnonSampler()
	s := &anonSampler{stopc: make(chan struct{}), done: make(chan float64, 1)}
	go func() {
		peak := rssAnonMiB()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				s.done <- max(peak, rssAnonMiB())
				return
			case <-t.C:
				peak = max(peak, rssAnonMiB())
			}
		}
	}()
	sampling = s
	return s
}

// stop ends the sampling and returns the peak in MiB (0 if unreadable).
func (s *anonSampler) stop() float64 {
	if s == nil {
		return 0
	}
	if sampling == s {
		sampling = nil
	}
	close(s.stopc)
	return <-s.done
}

// stopAnonSampler ends the running sampler, if any.
func stopAnonSampler() { sampling.stop() }

// rssAnonMiB is RssAnon of /proc/self/status in MiB, or 0.
func rssAnonMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	kb, _ := procField(b, "RssAnon:")
	return kb / 1024
}
