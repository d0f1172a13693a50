package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/pebble"
)

func testStore(t *testing.T) (store.Store, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	st, err := pebble.Open(t.TempDir(), pebble.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, clk
}

// testWorker registers a worker "w" on st with the built-in classes and no
// network; cfg may set the rest (LostTimeout, Release).
func testWorker(t *testing.T, st store.Store, cfg WorkerConfig) *Worker {
	t.Helper()
	cfg.ID, cfg.Addr, cfg.Store = "w", "127.0.0.1:1", st
	cfg.Classes, cfg.Connectors = engine.DefaultClasses(), engine.DefaultConnectors()
	cfg.Dial = func(string) (grpc.ClientConnInterface, error) { return nil, errors.New("no network here") }
	w, err := NewWorker(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestElectionHandover: one controller leads; a standby waits while the
// leader's lease lives and takes over once it expired (the store's clock
// decides), with a larger term.
func TestElectionHandover(t *testing.T) {
	st, clk := testStore(t)
	ctx := context.Background()
	a, err := Campaign(ctx, st, LeaderRecord{ID: "a"}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		b, err := Campaign(ctx, st, LeaderRecord{ID: "b"}, 5*time.Second, time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		won <- b
	}()
	// While a's lease is pinged, b does not win (many polls pass).
	for i := 0; i < 50; i++ {
		clk.Advance(time.Second)
		if err := st.PingLease(ctx, a.Record.Lease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		select {
		case <-won:
			t.Fatal("the standby won while the leader's lease was alive")
		default:
		}
	}
	clk.Advance(6 * time.Second) // a's lease expires
	b := <-won
	if b == nil || b.Term() <= a.Term() {
		t.Fatalf("standby's term %v not above %d", b, a.Term())
	}
	rec, ok, err := ReadLeader(ctx, st)
	if err != nil || !ok || rec.ID != "b" {
		t.Fatalf("leader row = %+v %v %v", rec, ok, err)
	}
}

// TestDeposedControllerFenced: after a standby took over, the deposed
// controller's commits fail with lease lost, a job lease it creates is
// aborted at once, and the new leader's AbortRecorded aborts every job
// lease the old one handed out.
func TestDeposedControllerFenced(t *testing.T) {
	st, _, fa, jobLease, b := deposed(t)
	ctx := context.Background()
	fb := Fence(st, b)
	recorded, err := fb.Recorded(ctx)
	if err != nil || len(recorded) != 1 || !recorded[jobLease] {
		t.Fatalf("Recorded = %v, %v; want the old leader's lease %s", recorded, err, jobLease)
	}
	n, err := fb.AbortRecorded(ctx, recorded, nil)
	if err != nil || n != 1 {
		t.Fatalf("AbortRecorded = %d, %v; want the old leader's one lease", n, err)
	}
	if ls, _ := st.LeaseState(ctx, jobLease); ls != store.LeaseAborted {
		t.Fatalf("the old leader's job lease is %v", ls)
	}
	// The deposed controller wakes up and acts.
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte("pipeline_state"), []byte("stopped"))
	if err := fa.Commit(ctx, txn); store.Classify(err) != store.ClassLeaseLost {
		t.Fatalf("deposed commit: %v, want lease lost", err)
	}
	if _, ok, _ := st.Get(ctx, store.FlowState, []byte("pipeline_state")); ok {
		t.Fatal("the deposed controller's write landed")
	}
	before := leaseCount(t, st)
	if _, err := fa.CreateLease(ctx, time.Hour); err == nil {
		t.Fatal("a deposed controller created a job lease")
	}
	// The lease it created before its record failed is aborted: no live
	// job lease of the old leader exists.
	if after := leaseCount(t, st); after != before {
		t.Fatalf("recorded leases %d → %d", before, after)
	}
	if _, err := fb.CreateLease(ctx, time.Hour); err != nil {
		t.Fatalf("the new leader cannot create leases: %v", err)
	}
}

func leaseCount(t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	p := []byte(leasePrefix)
	err := st.Scan(context.Background(), store.Range{Table: store.FlowState, Lo: p, Hi: append(append([]byte(nil), p...), 0xff)}, func(_, _ []byte) bool {
		n++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWorkerRefusesDeposedController: a worker that has seen a higher term
// refuses a lower one's heartbeats and starts.
func TestWorkerRefusesDeposedController(t *testing.T) {
	w := &Worker{jobs: map[plan.JobID]*runningJob{}}
	w.cfg.Logf = t.Logf
	if err := w.checkTermLocked(7, ProtocolVersion); err != nil {
		t.Fatal(err)
	}
	if err := w.checkTermLocked(5, ProtocolVersion); !isDeposed(err) {
		t.Fatalf("term 5 after 7: %v, want deposed", err)
	}
	if !errors.Is(w.checkTermLocked(9, ProtocolVersion), nil) {
		t.Fatal("a higher term refused")
	}
}

// unreachableStore fails every lease ping with a retriable error, as a
// store cut off by the network does.
type unreachableStore struct{ store.Store }

func (unreachableStore) PingLease(context.Context, store.LeaseID) error {
	return errors.New("dial tcp 10.0.0.1:5432: connect: no route to host")
}

// TestLeaderStepsDownOnItsOwnClock: a leader whose pings keep failing
// with a retriable error steps down once its lease's timeout has passed
// since its last renewal, by its own clock: the lease may have expired in
// the store and a standby may lead. Before, it kept retrying and acted on
// until a worker told it of a higher term (issue 23, item 7).
func TestLeaderStepsDownOnItsOwnClock(t *testing.T) {
	st, _ := testStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const timeout = 300 * time.Millisecond
	l, err := Campaign(ctx, unreachableStore{st}, LeaderRecord{ID: "a"}, timeout, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	go l.Keep(ctx, 20*time.Millisecond)
	select {
	case <-l.Lost():
		if !strings.Contains(l.Err().Error(), "leadership lease expired") {
			t.Fatalf("lost with %v", l.Err())
		}
	case <-time.After(10 * time.Second): // a hang guard, far above the timeout
		t.Fatal("the leader kept its leadership with no renewal for far longer than its lease timeout")
	}
}

// TestCheckSeesDeposition: a leader whose lease expired in the store (no
// ping reached it, and its own Keep has not run) learns from Check that it
// no longer leads, and the highest term: the standby's, once it took over.
// Check also ends the leadership (Lost is closed), so the controller stops
// acting without waiting for Keep.
func TestCheckSeesDeposition(t *testing.T) {
	st, clk := testStore(t)
	ctx := context.Background()
	a, err := Campaign(ctx, st, LeaderRecord{ID: "a"}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if held, highest, err := a.Check(ctx); err != nil || !held || highest != a.Term() {
		t.Fatalf("a live leader: held %v, highest %d (own %d), %v", held, highest, a.Term(), err)
	}
	clk.Advance(6 * time.Second) // a's lease expires in the store
	if held, highest, err := a.Check(ctx); err != nil || held || highest != a.Term() {
		t.Fatalf("an expired leader: held %v, highest %d, %v", held, highest, err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("Check found the lease expired but the leadership goes on")
	}
	b, err := Campaign(ctx, st, LeaderRecord{ID: "b"}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if held, highest, err := a.Check(ctx); err != nil || held || highest != b.Term() {
		t.Fatalf("the deposed leader: held %v, highest %d, want %d: %v", held, highest, b.Term(), err)
	}
	if held, highest, err := b.Check(ctx); err != nil || !held || highest != b.Term() {
		t.Fatalf("the new leader: held %v, highest %d: %v", held, highest, err)
	}
}

// unreadableStore fails every read, as a store a thawed process cannot
// reach yet does.
type unreadableStore struct{ store.Store }

func (unreadableStore) Get(context.Context, store.Table, []byte) ([]byte, bool, error) {
	return nil, false, errors.New("dial tcp 10.0.0.1:5432: i/o timeout")
}

// TestCheckOwnClockWhenStoreUnreadable: a leader frozen past its lease
// timeout (its Keep has not run since) whose first store read fails must
// not answer that it leads: its own clock says the lease may be over.
// Before, Check answered "held" whenever the store could not be read and
// Keep had not stepped down yet (TestDeposedControllerStandsBy saw
// "active": true from a thawed controller on a loaded machine).
func TestCheckOwnClockWhenStoreUnreadable(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	const timeout = 100 * time.Millisecond
	l, err := Campaign(ctx, st, LeaderRecord{ID: "a"}, timeout, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	l.st = unreadableStore{st}
	if held, _, err := l.Check(ctx); err == nil || !held {
		t.Fatalf("within its lease: held %v, %v; want held and the store's error", held, err)
	}
	time.Sleep(2 * timeout) // frozen: no renewal for longer than the timeout
	if held, _, err := l.Check(ctx); err == nil || held {
		t.Fatalf("past its lease on its own clock: held %v, %v; want not held and the store's error", held, err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Check found the lease over by its own clock but the leadership goes on")
	}
}

// TestDeposedControllerAbortsNoLease: a controller whose leadership ended
// aborts no job lease — its successor may have adopted the job (a thawed
// controller that still believed its workers lost aborted the leases of
// jobs the new leader had just adopted, which then restarted).
func TestDeposedControllerAbortsNoLease(t *testing.T) {
	st, a, fa, jobLease, _ := deposed(t)
	ctx := context.Background()
	// b adopts the job: its lease stays. a wakes up and asks its store.
	if held, _, err := a.Check(ctx); held || err != nil {
		t.Fatalf("Check of the deposed leadership: held %v, %v", held, err)
	}
	if err := fa.AbortLease(ctx, jobLease); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a deposed controller's AbortLease: %v, want ErrDeposed", err)
	}
	if ls, _ := st.LeaseState(ctx, jobLease); ls != store.LeaseActive {
		t.Fatalf("the adopted job's lease is %v after the deposed controller's abort, want active", ls)
	}
}

// deposed: controller a leads, hands out the job lease jobLease through
// its fenced store fa, and pauses past its leadership lease; b takes over.
func deposed(t *testing.T) (st store.Store, a *Leadership, fa *FencedStore, jobLease store.LeaseID, b *Leadership) {
	t.Helper()
	st, clk := testStore(t)
	ctx := context.Background()
	a, err := Campaign(ctx, st, LeaderRecord{ID: "a"}, 5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	fa = Fence(st, a)
	if jobLease, err = fa.CreateLease(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Second) // a paused past its lease timeout
	if b, err = Campaign(ctx, st, LeaderRecord{ID: "b"}, 5*time.Second, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return st, a, fa, jobLease, b
}
