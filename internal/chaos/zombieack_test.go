package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
)

// freezeAt blocks the first passage of one crash point until released.
type freezeAt struct {
	point   job.CrashPoint
	frozen  chan struct{}
	release chan struct{}
	done    bool
}

func (f *freezeAt) Crash(_ transport.PartitionID, p job.CrashPoint) error {
	if p == f.point && !f.done {
		f.done = true
		close(f.frozen)
		<-f.release
	}
	return nil
}

// zombieRig is a Reader (Transform, one source partition of 30 rows) and a
// Counter (one partition, collecting sync sink) whose epochs a test drives
// by hand.
type zombieRig struct {
	t       *testing.T
	ctx     context.Context
	st      store.Store
	rows    []weir.Row
	board   *board.Board
	newJob  func(comp string, part plan.PartitionSpec, id plan.JobID, hooks job.Hooks) (*job.Job, store.LeaseID)
	reader  plan.PartitionSpec
	counter plan.PartitionSpec
}

func newZombieRig(t *testing.T) *zombieRig {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := pstore.Open("db", pstore.Options{FS: vfs.NewMem(), Clock: clk, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var rows []weir.Row
	for i := 0; i < 30; i++ {
		rows = append(rows, weir.Row{"key": "k" + string(rune('a'+i%5))})
	}
	batch := plan.BatchPlan{MaxRows: 100, EmptyBackoff: time.Millisecond}
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		readerComp: {Name: readerComp, Code: builtin.Passthrough(weir.KindTransform), Source: testconn.NewSource(map[string][]weir.Row{"p0": rows}),
			SourceStream: "events", Outputs: []string{"words"}, Batch: batch},
		counterComp: {Name: counterComp, Code: builtin.Counter(), GroupBy: []string{"key"}, Partitions: 1,
			Inputs: []string{"words"}, Outputs: []string{"counts"}, Batch: batch,
			Sinks: []plan.SinkPlan{{ID: "out", InputStream: "counts", New: func() (connector.Sink, error) { return testconn.NewCollectSink("out"), nil }}}},
	}}
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	hub, board := transport.NewHub(0), board.NewBoard()
	readerPart := plan.PartitionSpec{ID: plan.SourcePartitionID(readerComp, "p0"), SourceKey: "p0"}
	lo, hi, toEnd := plan.PartitionRange(0, 1)
	counterPart := plan.PartitionSpec{ID: plan.KeyedPartitionID(counterComp, 0), Lo: lo, Hi: hi, ToEnd: toEnd}
	newJob := func(comp string, part plan.PartitionSpec, id plan.JobID, hooks job.Hooks) (*job.Job, store.LeaseID) {
		lease, err := st.CreateLease(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		j, err := job.New(job.Config{Plan: pl, Comp: pl.Computations[comp], Partition: part, JobID: id,
			Lease: lease, Store: st, Hub: hub, Board: board, Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Init(ctx); err != nil {
			t.Fatal(err)
		}
		return j, lease
	}
	return &zombieRig{t: t, ctx: ctx, st: st, rows: rows, board: board, newJob: newJob, reader: readerPart, counter: counterPart}
}

// zombieAfterCommit starts Reader job A, lets it commit its epoch and
// freezes it before its sends; the controller's part is played by hand:
// A's lease is aborted and the replacement B started (its Init re-sends
// the outbox). It returns B and a function that resumes A and waits for
// its epoch to end.
func (r *zombieRig) zombieAfterCommit() (b *job.Job, resumeA func()) {
	t := r.t
	freeze := &freezeAt{point: job.CrashAfterCommitBeforeAck, frozen: make(chan struct{}), release: make(chan struct{})}
	a, leaseA := r.newJob(readerComp, r.reader, "A#1", freeze)
	aDone := make(chan error, 1)
	go func() { _, err := a.Epoch(r.ctx); aDone <- err }()
	<-freeze.frozen
	if err := r.st.AbortLease(r.ctx, leaseA); err != nil {
		t.Fatal(err)
	}
	b, _ = r.newJob(readerComp, r.reader, "B#2", nil)
	return b, func() {
		close(freeze.release)
		if err := <-aDone; err != nil {
			t.Fatalf("zombie epoch: %v", err)
		}
	}
}

func (r *zombieRig) epochs(jobs ...*job.Job) {
	for i := 0; i < 20; i++ {
		for _, j := range jobs {
			if _, err := j.Epoch(r.ctx); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// TestZombieOfferCannotStealAck is the regression test of a
// liveness bug the chaos simulation found (TestMetamorphic seed 101,
// variant extra-stage-short-leases, under -race): a zombie's late offer
// takes the acknowledgement away from the live job.
//
// The Hub keeps one ack hook per buffered message, and an offer of an id
// that is already buffered replaces the hook ("the newest sender of an id
// is the one to tell", transport.Sender.OfferBatch). That assumes the
// newest offer comes from the newest job. A zombie breaks it: job A (lease 1) commits an
// epoch and stalls before its post-commit sends; the controller aborts
// lease 1 and starts B (lease 2), which reloads the outbox and offers the
// outputs; A wakes up and offers the same ids, replacing B's hooks with its
// own. The receiver processes them and acknowledges — to A, which is dead.
// B's outbox keeps the outputs forever: B never reports quiet, its
// partition never drains, and a finite pipeline never completes (until B
// restarts for another reason). With a Swift sender the stuck outputs also
// hold their parents unacknowledged, which blocks upstream. No data is lost
// or duplicated; the pipeline stops making progress.
//
// Steps (all epochs driven by hand, no scheduler): a Reader (Transform)
// over one source partition, a Counter with a collecting sync sink; A
// freezes at after-commit-before-ack; lease 1 aborted; B.Init; A released;
// Counter epochs; B epochs. Want: B's outbox drains (its status turns
// quiet). Fixed by fencing senders in the transport (Hub.RegisterSender):
// once B registers, A's offers are dropped.
func TestZombieOfferCannotStealAck(t *testing.T) {
	r := newZombieRig(t)
	counter, _ := r.newJob(counterComp, r.counter, "C#1", nil)
	b, resumeA := r.zombieAfterCommit()
	resumeA() // A sends after B did, before the Counter processed B's copies
	r.epochs(counter, b)
	got, err := testconn.ReadCollected(r.ctx, r.st, "out")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(r.rows) {
		t.Fatalf("the Counter committed %d outputs, want %d", len(got), len(r.rows))
	}
	s, ok := r.board.Status(r.reader.ID)
	if !ok || s.Job != "B#2" {
		t.Fatalf("no status of B: %+v", s)
	}
	if !s.Quiet {
		t.Fatalf("B (the live Reader job) still holds undelivered outputs after the Counter acknowledged all %d of them: the zombie's late offer replaced B's ack hooks, so the acknowledgements went to the zombie; B's partition never drains and the pipeline never completes", len(r.rows))
	}
}

// TestZombieLateSendNotDuplicated is the regression test of an
// exactly-once violation the chaos simulation found (weir chaos --seed 7066
// --per-seed 2000, zombies frozen after their commit: a key counted 73 times for 72 inputs). It
// needs the receiver-side optimization of 409b87f: a receiver looks up its
// dedup table only for deliveries marked MaybeDuplicate, and a sender marks
// an output MaybeDuplicate only if it may have sent it before in its own
// life. A zombie breaks that: job A commits an epoch and stalls before its
// sends (after-commit-before-ack); the controller re-leases the partition;
// the replacement B reloads the outbox and sends the outputs (marked
// MaybeDuplicate); the receiver processes and acknowledges them; then A
// wakes up and sends the same ids unmarked — new to A, not to the
// receiver. The receiver skips the lookup and processes them again: every
// output of A's epoch is counted twice. Transform and Swift senders are
// both exposed (a Swift zombie's outputs inherit the same ids). In the
// embedded engine a zombie is a job goroutine that stalls for longer than
// the lost-job timeout (3s by default) between its commit and its sends —
// the source's ReportCommitted and the sinks' Commit run there — or a job on
// a worker declared lost.
//
// Want: the Counter's output is exactly once (30 outputs for 30 rows).
// Fixed by fencing senders in the transport (Hub.RegisterSender): once B
// has registered as the Reader partition's sender, A's offers are dropped.
func TestZombieLateSendNotDuplicated(t *testing.T) {
	r := newZombieRig(t)
	counter, _ := r.newJob(counterComp, r.counter, "C#1", nil)
	b, resumeA := r.zombieAfterCommit()
	r.epochs(counter, b) // the Counter processes and acknowledges B's copies
	resumeA()            // A sends the same ids, unmarked
	r.epochs(counter, b)
	got, err := testconn.ReadCollected(r.ctx, r.st, "out")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(r.rows) {
		t.Fatalf("the Counter committed %d outputs for %d input rows: the zombie's late, unmarked sends were processed a second time without a dedup lookup", len(got), len(r.rows))
	}
}
