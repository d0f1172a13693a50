package job

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// gapSource has one partition whose offsets 0..4 hold no record (a run of
// empty tables, transaction markers); offset 5 holds one.
type gapSource struct{ reads []connector.Offset }

func (g *gapSource) Partitions(context.Context) ([]string, error) { return []string{"p"}, nil }
func (g *gapSource) Open(context.Context, string) (connector.SourcePartition, error) {
	return &gapPartition{g}, nil
}
func (g *gapSource) Close() error { return nil }

type gapPartition struct{ g *gapSource }

func (p *gapPartition) Key() string { return "p" }
func (p *gapPartition) Read(_ context.Context, from connector.Offset, _, _ int) (connector.Batch, error) {
	p.g.reads = append(p.g.reads, from)
	if from < 5 {
		return connector.Batch{Next: 5}, nil
	}
	if from == 5 {
		return connector.Batch{Records: []connector.Record{{Offset: 5, WriteTimestamp: 1 << 40, Row: weir.Row{"key": "a"}}}, Next: 6, End: true}, nil
	}
	return connector.Batch{Next: from, End: true}, nil
}
func (p *gapPartition) ReportCommitted(context.Context, connector.Offset) error { return nil }
func (p *gapPartition) Finite() bool                                            { return true }
func (p *gapPartition) Close() error                                            { return nil }

// TestEmptyBatchMovesThePosition: a read that finds no record but reports
// a Next beyond its start (offsets that hold nothing) moves the position
// there, committed like any other, for a Transform and a Swift reader:
// those offsets are not read again.
func TestEmptyBatchMovesThePosition(t *testing.T) {
	for _, kind := range []weir.Kind{weir.KindTransform, weir.KindSwiftMap} {
		ctx := context.Background()
		st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		src := &gapSource{}
		pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
			"R": {Code: builtin.Passthrough(kind), Source: src, SourceStream: "s", Outputs: []string{"out"}},
		}}
		part := plan.SourcePartitionID("R", "p")
		j := startTestJob(t, st, transport.NewHub(0), pl, "R", plan.PartitionSpec{ID: part, SourceKey: "p"})
		for i := 0; i < 4; i++ {
			if _, err := j.Epoch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(src.reads) < 2 || src.reads[0] != 0 || src.reads[1] != 5 {
			t.Fatalf("%v: reads from %v, want 0 then 5", kind, src.reads)
		}
		v, _, err := st.Get(ctx, store.PartitionStates, tables.PartitionStateKey(string(part), sourceStateName))
		if err != nil {
			t.Fatal(err)
		}
		r := tables.Reader{B: v[1:]}
		if off := r.Uvarint(); off != 6 {
			t.Fatalf("%v: committed position %d, want 6", kind, off)
		}
	}
}

// notifySource is a one-partition source whose partition can say when it
// grew (connector.ReadNotifier): grow appends a record and closes the
// channel Readable handed out.
type notifySource struct {
	mu    sync.Mutex
	n     int           // records: offsets 0..n-1
	ended int           // the Next of the last read that found the end
	grew  chan struct{} // closed by grow
	read  chan struct{} // signalled on each Read
	wait  chan int      // each Readable call's from, when it hands out grew
}

func (s *notifySource) Partitions(context.Context) ([]string, error) { return []string{"p"}, nil }
func (s *notifySource) Open(context.Context, string) (connector.SourcePartition, error) {
	return (*notifyPartition)(s), nil
}
func (s *notifySource) Close() error { return nil }

func (s *notifySource) grow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	close(s.grew)
	s.grew = make(chan struct{})
}

type notifyPartition notifySource

func (p *notifyPartition) Key() string { return "p" }
func (p *notifyPartition) Read(_ context.Context, from connector.Offset, maxRows, _ int) (connector.Batch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := connector.Batch{Next: from}
	for o := from; int(o) < p.n && len(b.Records) < maxRows; o++ {
		b.Records = append(b.Records, connector.Record{Offset: o, WriteTimestamp: 1, Row: weir.Row{"i": int64(o)}})
		b.Next = o + 1
	}
	b.End = len(b.Records) < maxRows
	if b.End {
		p.ended = int(b.Next)
	}
	select {
	case p.read <- struct{}{}:
	default:
	}
	return b, nil
}
func (p *notifyPartition) Readable(from connector.Offset) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(from) < p.n {
		return closedChan
	}
	select {
	case p.wait <- int(from):
	default:
	}
	return p.grew
}
func (p *notifyPartition) ReportCommitted(context.Context, connector.Offset) error { return nil }
func (p *notifyPartition) Finite() bool                                            { return false }
func (p *notifyPartition) Close() error                                            { return nil }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// TestSourceWakesWhenReadable: a job whose source read found the end waits
// on the partition's Readable channel, not for empty_batch_backoff (an
// hour here, with no idle probe either): a record that appears is read at
// once, each time.
func TestSourceWakesWhenReadable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	src := &notifySource{grew: make(chan struct{}), read: make(chan struct{}, 1), wait: make(chan int, 1)}
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"R": {Code: builtin.Passthrough(weir.KindTransform), Source: src, SourceStream: "s", Outputs: []string{"out"},
			Batch: plan.BatchPlan{MaxRows: 10, EmptyBackoff: time.Hour}, LeaseCheckPeriod: time.Hour},
	}}
	if err := pl.Validate(); err != nil {
		t.Fatal(err)
	}
	lease, err := st.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(Config{Plan: pl, Comp: pl.Computations["R"], Partition: plan.PartitionSpec{ID: plan.SourcePartitionID("R", "p"), SourceKey: "p"},
		JobID: "R-test", Lease: lease, Store: st, Hub: transport.NewHub(0), Board: board.NewBoard(), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	go j.Run(ctx)
	// readToEnd waits until the job's last read found the end at n records.
	readToEnd := func(what string, n int) {
		t.Helper()
		for {
			src.mu.Lock()
			ended := src.ended
			src.mu.Unlock()
			if ended == n {
				return
			}
			select {
			case <-src.read:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: no read in 20 s (empty_batch_backoff is an hour)", what)
			}
		}
	}
	// waiting waits until the job, idle at n records, waits on Readable.
	waiting := func(n int) {
		t.Helper()
		for {
			select {
			case from := <-src.wait:
				if from == n {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the job, idle at %d records, did not wait on Readable in 20 s", n)
			}
		}
	}
	readToEnd("the first epoch", 0)
	for n := 1; n <= 3; n++ {
		waiting(n - 1)
		src.grow()
		readToEnd(fmt.Sprintf("record %d appeared", n), n)
	}
}

// TestBlockedSourceDoesNotWaitForInput: an epoch blocked by a full
// downstream buffer reads nothing, so its job must not wait on the
// source's Readable channel — already closed when records wait, it would
// make the job run idle epochs in a busy loop until room appears. The
// epoch before it read to the end; the blocked one resets that.
func TestBlockedSourceDoesNotWaitForInput(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	src := &notifySource{grew: make(chan struct{}), read: make(chan struct{}, 1), wait: make(chan int, 1)}
	noop := weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil })
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"R": {Code: builtin.Passthrough(weir.KindTransform), Source: src, SourceStream: "s", Outputs: []string{"out"},
			Batch: plan.BatchPlan{MaxRows: 10, EmptyBackoff: time.Hour}},
		"B": {Code: noop, GroupBy: []string{"i"}, Partitions: 1, Inputs: []string{"out"}},
	}}
	hub := transport.NewHub(1 << 20)
	hub.SetRowLimit(3)
	j := startTestJob(t, st, hub, pl, "R", plan.PartitionSpec{ID: plan.SourcePartitionID("R", "p"), SourceKey: "p"})
	hub.Attach(plan.KeyedPartitionID("B", 0))
	for range 5 {
		src.grow()
	}
	if res, err := j.Epoch(ctx); err != nil || res.Fetched != 5 {
		t.Fatalf("first epoch: fetched %d, %v; want the 5 records", res.Fetched, err)
	}
	if j.waitingOffers() == 0 {
		t.Fatal("no output waits for room in a buffer of 3 rows after 5 outputs")
	}
	src.grow() // a record waits: the partition is readable
	if res, err := j.Epoch(ctx); err != nil || res.Fetched != 0 {
		t.Fatalf("blocked epoch: fetched %d, %v; want nothing", res.Fetched, err)
	}
	if c := j.src.wake(); c != nil {
		t.Fatal("a job whose epoch was blocked waits on its source's Readable channel (closed: a busy loop)")
	}
}
