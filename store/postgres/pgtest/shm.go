package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseSharedMemory removes what a PostgreSQL server killed on data
// directory dataDir left outside its processes, as a reboot would: the
// System V shared memory segment named in its lock file postmaster.pid,
// and the lock file. It does nothing when there is no lock file (a clean
// shutdown removes it). A segment still attached is an error, since some
// process of that server is then alive, and nothing is removed.
//
// Servers started here keep their dynamic shared memory in the data
// directory (dynamic_shared_memory_type=mmap) and their main segment in
// anonymous memory (PostgreSQL's default), so this segment is the only
// piece outside the directory. PostgreSQL would remove it itself at its
// next start on dataDir; releasing it right after a kill keeps a test that
// never restarts the server from leaking it, and keeps the restart honest
// (nothing of the old server remains).
func ReleaseSharedMemory(dataDir string) error {
	lockFile := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(lockFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Line 7 of postmaster.pid is "<shmem key> <shmem id>" (written
	// once the segment exists; a server killed earlier has none).
	lines := strings.Split(string(b), "\n")
	if len(lines) >= 7 {
		var key uint64
		var id int
		if n, _ := fmt.Sscan(lines[6], &key, &id); n == 2 {
			if err := removeSegment(int32(key), id); err != nil {
				return fmt.Errorf("%s: %w", lockFile, err)
			}
		}
	}
	if err := os.Remove(lockFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeSegment removes the System V segment id if it still exists with
// key, unattached. A segment id may be reused by the time a test cleans
// up, so both key and id must match.
func removeSegment(key int32, id int) error {
	f, err := os.Open("/proc/sysvipc/shm")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// key shmid perms size cpid lpid nattch ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		k, err1 := strconv.ParseInt(fields[0], 10, 64)
		shmid, err2 := strconv.Atoi(fields[1])
		nattch, err3 := strconv.Atoi(fields[6])
		if err1 != nil || err2 != nil || err3 != nil || int32(k) != key || shmid != id {
			continue
		}
		if nattch > 0 {
			return fmt.Errorf("shared memory segment %d (key %d) is still attached by %d processes: a process of the killed server is alive", id, key, nattch)
		}
		if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
			return fmt.Errorf("remove shared memory segment %d: %w", id, err)
		}
		return nil
	}
	return sc.Err()
}
