package testhosts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// An owner identity names the test process that made a namespace or a
// directory: "<pid>.<start time>", the start time in clock ticks since boot
// from /proc/<pid>/stat. The start time tells a live owner from a new
// process that reuses a dead owner's PID.

var (
	selfOnce sync.Once
	selfID   string
)

// self is this process's owner identity.
func self() string {
	selfOnce.Do(func() {
		pid := os.Getpid()
		start, _, _ := startTime(pid)
		selfID = fmt.Sprintf("%d.%d", pid, start)
	})
	return selfID
}

// startTime is field 22 of /proc/<pid>/stat, with whether the process
// has ended (a zombie, not yet reaped by its parent, still has its entry).
func startTime(pid int) (start uint64, ended bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// or parentheses: count fields from the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return 0, false, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return start, fields[0] == "Z" || fields[0] == "X", err
}

// alive reports whether the process of owner identity id still runs (a
// zombie does not). An
// identity it cannot parse is treated as alive: what it names is not ours
// to remove.
func alive(id string) bool {
	pidStr, startStr, ok := strings.Cut(id, ".")
	if !ok {
		return true
	}
	pid, err1 := strconv.Atoi(pidStr)
	start, err2 := strconv.ParseUint(startStr, 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	now, ended, err := startTime(pid)
	return err == nil && !ended && now == start
}

// ownerOf returns the owner identity in name after prefix ("" if name
// is not one of ours).
func ownerOf(name, prefix string) string {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "-")
	return id
}

// sweepStale removes what test processes that are no longer running left
// behind — a test binary SIGKILLed, or stopped by a timeout's panic,
// never runs its cleanups: their namespaces (every process in them killed
// first, by PID), then their directories (the shared memory of the
// PostgreSQL servers killed with them released first). What belongs to
// live processes, this one included, is left alone.
func sweepStale() error {
	var errs []error
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range ents {
		if id := ownerOf(e.Name(), nsPrefix); id != "" && !alive(id) {
			if err := deleteNetns(e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if id := ownerOf(filepath.Base(d), dirPrefix); id == "" || alive(id) {
			continue
		}
		datas, _ := filepath.Glob(filepath.Join(d, "weir-postgres-*", "data"))
		released := true
		for _, data := range datas {
			if err := pgtest.ReleaseSharedMemory(data); err != nil {
				errs = append(errs, err)
				released = false
			}
		}
		if !released {
			continue // its lock files name the segments: keep them for the next sweep
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
