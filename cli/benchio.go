package cli

import "os"

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
	v, ok := procField(b, "wchar:")
	return int64(v), ok
}
