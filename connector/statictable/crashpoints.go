//go:build weir_crashpoints

package statictable

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// CrashEnv names the environment variable read by a weir_crashpoints
// build: "POINT:N" kills the process with SIGKILL the N-th time (from 1)
// any sink instance reaches POINT. Only test binaries are built with the
// tag.
const CrashEnv = "WEIR_STATICTABLE_CRASH"

func init() {
	v := os.Getenv(CrashEnv)
	if v == "" {
		return
	}
	point, nth, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q: want POINT:N\n", CrashEnv, v)
		os.Exit(2)
	}
	var mu sync.Mutex
	hits := 0
	crashAt = func(p string) {
		if p != point {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if hits++; hits == n {
			fmt.Fprintf(os.Stderr, "weir: crash point %s reached (%d); SIGKILL\n", p, n)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
