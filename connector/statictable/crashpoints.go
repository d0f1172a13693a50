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
