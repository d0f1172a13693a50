package cli

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// selfWritten is the number of bytes this process has written through
// write system calls so far (wchar in /proc/self/io): for a bench row, its
// store's log, flushes and compactions — the write amplification that
// store B/msg, the directory's size at the end, does not show. ok is false
// where the kernel does not tell.
func selfWritten() (n int64, ok bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, found := bytes.CutPrefix(sc.Bytes(), []byte("wchar:")); found {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
