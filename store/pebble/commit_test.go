package pebble

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-stream/weir/store"
)

// heldSync holds the first WAL sync after it is armed until release, then
// lets it fail (fail) or succeed; later syncs pass.
type heldSync struct {
	armed   atomic.Bool
	held    chan struct{} // closed when the held sync has started
	release chan struct{}
	fail    bool
	once    atomic.Bool
}

func newHeldSync(fail bool) *heldSync {
	return &heldSync{held: make(chan struct{}), release: make(chan struct{}), fail: fail}
}

func (h *heldSync) String() string { return "heldSync" }

func (h *heldSync) MaybeError(op errorfs.Op) error {
	if !h.armed.Load() || !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !h.once.CompareAndSwap(false, true) {
		return nil
	}
	close(h.held)
	<-h.release
	if h.fail {
		return errorfs.ErrInjected
	}
	return nil
}

// checkedCommitsSharingSync starts checked commit A, waits until its WAL
// sync is held (A is visible then), and starts checked commit B, which
// checks A's write. It returns A's and B's results once the sync is
// released, and whether B became visible while A's sync was still held.
// Both also append to one sequence when appends is set.
func checkedCommitsSharingSync(t *testing.T, fail, appends bool) (errA, errB error, bVisibleEarly bool) {
	t.Helper()
	h := newHeldSync(fail)
	s, err := Open("db", Options{FS: wrapFS(vfs.NewMem(), h), Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	// An append's first commit writes the timestamp ceiling with a sync of
	// its own: do that before the sync is held.
	warm := store.NewTxn()
	warm.Append(store.QueueRows, []byte("q"), []byte("row 0"))
	if err := s.Commit(ctx, warm); err != nil {
		t.Fatalf("warm-up commit: %v", err)
	}
	h.armed.Store(true)

	a := store.NewTxn()
	a.CheckAbsent(store.States, []byte("guard-a"))
	a.Put(store.States, []byte("k"), []byte("a"))
	if appends {
		a.Append(store.QueueRows, []byte("q"), []byte("row a"))
	}
	doneA := make(chan error, 1)
	go func() { doneA <- s.Commit(ctx, a) }()
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("commit A never reached its WAL sync")
	}

	b := store.NewTxn()
	b.CheckValue(store.States, []byte("k"), []byte("a")) // A's write: visible, not yet durable
	b.Put(store.States, []byte("k2"), []byte("b"))
	if appends {
		b.Append(store.QueueRows, []byte("q"), []byte("row b"))
	}
	doneB := make(chan error, 1)
	go func() { doneB <- s.Commit(ctx, b) }()
	// B needs no sync of its own to become visible; A's sync is still held.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !bVisibleEarly {
		if v, ok, err := s.Get(ctx, store.States, []byte("k2")); err == nil && ok && string(v) == "b" {
			bVisibleEarly = true
		}
		time.Sleep(time.Millisecond)
	}
	close(h.release)
	return <-doneA, <-doneB, bVisibleEarly
}

// TestCheckedCommitsShareSync: a checked commit does not wait for an
// earlier checked commit's WAL sync before it checks and applies its batch
// (it used to hold the check lock through its sync, so every job's epoch
// commit paid its own fsync in turn); both are durable once the sync
// returns.
func TestCheckedCommitsShareSync(t *testing.T) {
	for _, appends := range []bool{false, true} {
		errA, errB, early := checkedCommitsSharingSync(t, false, appends)
		if errA != nil || errB != nil {
			t.Fatalf("appends %v: commit A: %v, commit B: %v; want both to succeed", appends, errA, errB)
		}
		if !early {
			t.Fatalf("appends %v: commit B became visible only after commit A's WAL sync returned: checked commits serialize on each other's fsync", appends)
		}
	}
}

// TestFailedSyncFailsLaterCheckedCommit: B checked A's write while A was
// visible but not durable; A's sync fails, so neither may be reported
// durable (A ambiguous; B ambiguous too, or refused by the broken store).
// With appends, A's failure must not rewind the sequence B appended to
// after A became visible (under -race: the tail written without its lock,
// found by the chaos swarm's WAL faults).
func TestFailedSyncFailsLaterCheckedCommit(t *testing.T) {
	for _, appends := range []bool{false, true} {
		errA, errB, _ := checkedCommitsSharingSync(t, true, appends)
		var amb *store.AmbiguousError
		if !errors.As(errA, &amb) {
			t.Fatalf("appends %v: commit A: %v, want an ambiguous error", appends, errA)
		}
		if errB == nil {
			t.Fatalf("appends %v: commit B succeeded after the sync that made commit A durable failed: B's check read data that may be lost", appends)
		}
		if !errors.As(errB, &amb) && !errors.Is(errB, ErrBroken) {
			t.Fatalf("appends %v: commit B: %v, want an ambiguous error or ErrBroken", appends, errB)
		}
	}
}
