// Package sim drives the whole engine — controller, jobs, transport, store
// — on one goroutine, one step at a time, with a manual clock. A step is a
// controller cycle, one epoch of one partition (decided, then applied), a
// clock move, or a fault: a crash at a named point, a lost acknowledgement,
// an aborted or expired lease, a commit whose outcome is unknown and that
// lands later, a source partition that appears, a pause or stop. Steps come
// from a protocol script (testdata/*.txt, run by the datadriven tests) or
// from a seeded random schedule (RandomRun), and every decision a step made
// is written to the trace. Nothing runs on another goroutine, the store is
// Pebble on an in-memory filesystem and every source of randomness is
// seeded, so a seed replays the same trace bit for bit.
//
// The pipeline is the keyed counter of the exactly-once oracle:
//
//	source "events" (testconn) → Reader (Transform or Swift) → "words"
//	  [→ Relay (SwiftMap, optionally batching) → "relayed"]
//	  → Counter (group_by key; or the timer-driven counter) → "counts" → sink "out"
//
// where "out" is a collecting sync sink (or an at-most-once sink that only
// records what it is handed).
package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-stream/weir/externalstate"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/faultinject"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
)

// Options shape the simulated pipeline.
type Options struct {
	// Sources maps source partition keys to their rows' keys ("a", "b"...).
	Sources map[string][]string
	// Rows, if set, are the source partitions' rows as they are (instead
	// of rows made from Sources).
	Rows map[string][]weir.Row
	// Code, if set, replaces Counter by a computation "User" running it
	// (Counters partitions, key GroupBy, default ["key"]): it reads
	// "words" and emits on "out", which the sink collects — through a
	// Transform "Collect" when Code is a SwiftMap (a SwiftMap has no sinks).
	Code    *weir.Computation
	GroupBy []string
	// SwiftReader makes Reader a SwiftOrderedSource (else a
	// TransformOrderedSource).
	SwiftReader bool
	// Relay inserts a SwiftMap between Reader and Counter; Batching lets it
	// merge several inputs into one output
	// (allow_batching_with_relaxed_guarantees).
	Relay, Batching bool
	// Timers replaces Counter by the timer-driven counter.
	Timers bool
	// AtMostOnceSink replaces the collecting sink by an at-most-once sink
	// that records what it is handed.
	AtMostOnceSink bool
	// StatefulRelay makes the Swift relay use state (which Swift
	// computations may not: see issue 11, scenario 2).
	StatefulRelay bool
	// TransformRelay makes the relay a keyed Transform (Passthrough) on two
	// partitions, which a rescale may change.
	TransformRelay bool
	// BackgroundListing lists the sources on the controller's background
	// goroutine (as in production) instead of inside the cycle; with
	// BlockListing the source's next listing blocks until ReleaseListing.
	BackgroundListing bool
	// Tail adds a Transform "Tail" (one partition) reading "counts": a
	// second destination of Counter's outputs, which keeps them in the
	// outbox until it acknowledges them.
	Tail bool
	// Counters is Counter's partition count (default 2); Workers the
	// number of workers (default 1); BatchRows max_rows_per_batch
	// (default 100).
	Counters, Workers, BatchRows int
	// BufferBytes bounds each mailbox (default 1 MiB).
	BufferBytes int
	// StateCacheBytes bounds Counter's state cache (0: default).
	StateCacheBytes int
	// LeaseTimeout (default 5s), LeaseCheckPeriod (default 2s).
	LeaseTimeout, LeaseCheckPeriod time.Duration
	// QuiesceTimeout is the controller's (controller.Config; default 10s).
	QuiesceTimeout time.Duration
	// Infinite makes the source unbounded (the pipeline never completes;
	// partitions may appear).
	Infinite bool
	// External makes Counter a builtin.ExternalCounter: its counts live in
	// the external state table key_counts, written in the epoch commit.
	External bool
	// ExternalStates are external state tables the User computation (Code)
	// may read and write.
	ExternalStates []*externalstate.Table
	// Seed seeds the controller's and jobs' randomness.
	Seed uint64
	// Balance turns on the controller's partition balancing (the
	// distributed mode's): workers may join (AddWorker) and drain.
	Balance bool
}

func (o *Options) defaults() {
	if o.Counters == 0 {
		o.Counters = 2
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.BatchRows == 0 {
		o.BatchRows = 100
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = 1 << 20
	}
	if o.GroupBy == nil {
		o.GroupBy = []string{"key"}
	}
	if o.LeaseTimeout == 0 {
		o.LeaseTimeout = 5 * time.Second
	}
	if o.LeaseCheckPeriod == 0 {
		o.LeaseCheckPeriod = 2 * time.Second
	}
}

// Sim is one simulated pipeline.
type Sim struct {
	o       Options
	Clock   *clock.Manual
	Store   *Store
	Hub     *transport.Hub
	Board   *board.Board
	Plan    *plan.Plan
	Ctl     *controller.Controller
	Workers []*Worker
	Source  *testconn.Source
	// Handed records what the at-most-once sink was handed, in order.
	Handed []msgid.ID

	// pendingApply is the apply half of a cycle CycleDecide decided, and
	// beforeApply the jobs before it.
	pendingApply func(context.Context) error
	beforeApply  map[transport.PartitionID]plan.JobID

	ctx     context.Context
	out     strings.Builder
	crashes map[transport.PartitionID]job.CrashPoint
	faults  *hubFaults
	frozen  map[transport.PartitionID]bool
	rows    map[string][]weir.Row
	listing *gatedSource
	// handovers counts Handover's new controllers (their job id prefixes).
	handovers int
}

// New builds a simulated pipeline; nothing has run yet.
func New(o Options) (*Sim, error) {
	o.defaults()
	s := &Sim{o: o, ctx: context.Background(), crashes: map[transport.PartitionID]job.CrashPoint{},
		frozen: map[transport.PartitionID]bool{}, rows: map[string][]weir.Row{}}
	s.Clock = clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	raw, err := pstore.Open("sim", pstore.Options{FS: vfs.NewMem(), Clock: s.Clock})
	if err != nil {
		return nil, err
	}
	s.Store = newStore(raw)
	for p, rows := range o.Rows {
		s.rows[p] = append([]weir.Row(nil), rows...)
	}
	for p, keys := range o.Sources {
		s.rows[p] = nil // a partition without rows still exists
		for i, k := range keys {
			s.rows[p] = append(s.rows[p], weir.Row{"key": k, "seq": int64(i), "event_ts": int64(i+1) * int64(time.Second)})
		}
	}
	s.Source = testconn.NewSource(cloneRows(s.rows))
	s.Source.Infinite = o.Infinite
	s.listing = &gatedSource{Source: s.Source}
	s.Plan = s.buildPlan()
	s.Hub = transport.NewHub(o.BufferBytes)
	s.faults = &hubFaults{lose: map[transport.PartitionID]int{}}
	s.Hub.SetFaults(s.faults)
	s.Board = board.NewBoard()
	for i := 0; i < o.Workers; i++ {
		s.Workers = append(s.Workers, &Worker{id: fmt.Sprintf("w%d", i), sim: s, lastBeat: s.Clock.Now()})
	}
	if s.Ctl, err = s.newController(""); err != nil {
		return nil, err
	}
	return s, nil
}

// newController builds a controller of the simulated pipeline whose job
// ids start with prefix (a controller taking over: Handover).
func (s *Sim) newController(prefix string) (*controller.Controller, error) {
	o := s.o
	return controller.New(controller.Config{
		Plan: s.Plan, Store: s.Store, Hub: s.Hub, Board: s.Board, Pool: simPool{s}, Balance: o.Balance, JobIDPrefix: prefix,
		LeaseTimeout: o.LeaseTimeout, LeasePingPeriod: o.LeaseTimeout / 5, LostWorkerTimeout: o.LeaseTimeout / 2,
		SchedulerPeriod: 100 * time.Millisecond, SyncListings: !o.BackgroundListing, SourceRelistPeriod: time.Second,
		RestartBackoff: -1, Rand: rand.New(rand.NewPCG(o.Seed, 1)), Logf: s.logf, QuiesceTimeout: o.QuiesceTimeout,
		Warnf: func(format string, args ...any) {
			if strings.Contains(format, "rescale") {
				s.logf("warning: "+format, args...) // the scripts show the rescale's warnings
			}
		},
	})
}

func cloneRows(m map[string][]weir.Row) map[string][]weir.Row {
	out := make(map[string][]weir.Row, len(m))
	for k, v := range m {
		out[k] = append([]weir.Row(nil), v...)
	}
	return out
}

// Close releases the store.
func (s *Sim) Close() error { return s.Store.raw.Close() }

func (s *Sim) buildPlan() *plan.Plan {
	o := s.o
	readerKind := weir.KindTransform
	if o.SwiftReader {
		readerKind = weir.KindSwiftMap
	}
	batch := plan.BatchPlan{MaxRows: o.BatchRows}
	counterIn := "words"
	newSink := func() (connector.Sink, error) {
		if o.AtMostOnceSink {
			return &recordingSink{sim: s}, nil
		}
		return testconn.NewCollectSink("out"), nil
	}
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"Reader": {Code: builtin.Passthrough(readerKind), Source: s.listing, SourceStream: "events",
			Outputs: []string{"words"}, Batch: batch, LeaseCheckPeriod: o.LeaseCheckPeriod},
		"Counter": {Code: builtin.Counter(), GroupBy: o.GroupBy, Partitions: o.Counters,
			Inputs: []string{"words"}, Outputs: []string{"counts"}, Batch: batch, LeaseCheckPeriod: o.LeaseCheckPeriod,
			StateCacheBytes: o.StateCacheBytes,
			Sinks:           []plan.SinkPlan{{ID: "out", InputStream: "counts", New: newSink}}},
	}}
	if o.Code != nil {
		user := pl.Computations["Counter"]
		delete(pl.Computations, "Counter")
		user.Code, user.Outputs = *o.Code, []string{"out"}
		pl.Computations["User"] = user
		for _, t := range o.ExternalStates {
			if user.ExternalStates == nil {
				user.ExternalStates = map[string]plan.ExternalAccess{}
			}
			user.ExternalStates[t.Name] = plan.ExternalAccess{Table: t, Write: true}
		}
		if o.Code.Kind == weir.KindSwiftMap {
			user.Sinks = nil
			pl.Computations["Collect"] = &plan.CompPlan{Code: builtin.Passthrough(weir.KindTransform), GroupBy: o.GroupBy, Partitions: 1,
				Inputs: []string{"out"}, Outputs: []string{"collected"}, Batch: batch, LeaseCheckPeriod: o.LeaseCheckPeriod,
				Sinks: []plan.SinkPlan{{ID: "out", InputStream: "collected", New: newSink}}}
		} else {
			user.Sinks[0].InputStream = "out"
		}
	}
	if o.External {
		c := pl.Computations["Counter"]
		c.Code = builtin.ExternalCounter()
		c.ExternalStates = map[string]plan.ExternalAccess{builtin.KeyCountsTable: {Table: builtin.KeyCountsDecl(), Write: true}}
	}
	if o.Timers {
		c := pl.Computations["Counter"]
		c.Code = testconn.TimerCounter()
		c.Timers = map[string]plan.TimerPlan{"fire": {}}
	}
	if o.Tail {
		pl.Computations["Tail"] = &plan.CompPlan{Code: weir.Transform(func(weir.Context, *weir.Message, weir.Output) error { return nil }),
			GroupBy: []string{"key"}, Partitions: 1, Inputs: []string{"counts"}, Batch: batch, LeaseCheckPeriod: o.LeaseCheckPeriod}
	}
	if o.Relay {
		relay := builtin.Passthrough(weir.KindSwiftMap)
		if o.Batching {
			relay = batchingRelay()
		}
		if o.StatefulRelay {
			relay = statefulRelay()
		}
		parts := 1
		if o.TransformRelay {
			relay, parts = builtin.Passthrough(weir.KindTransform), 2
		}
		pl.Computations["Relay"] = &plan.CompPlan{Code: relay, GroupBy: []string{"key"}, Partitions: parts,
			AllowBatching: o.Batching, Inputs: []string{"words"}, Outputs: []string{"relayed"}, Batch: batch,
			LeaseCheckPeriod: o.LeaseCheckPeriod}
		counterIn = "relayed"
		pl.Computations["Counter"].Inputs = []string{counterIn}
	}
	return pl
}

// batchingRelay is a SwiftMap that merges the inputs of one key in one
// epoch into a single output with all of them as parents.
func batchingRelay() weir.Computation {
	return weir.Computation{Kind: weir.KindSwiftMap, OnMessages: func(_ weir.Context, msgs []*weir.Message, out weir.Output) error {
		return out.AddWithParents("relayed", weir.Row{"key": msgs[0].Payload["key"], "n": int64(len(msgs))}, msgs...)
	}}
}

var seen = weir.NewState[int64]("seen")

// statefulRelay is a SwiftMap that counts what it saw in a state: refused.
func statefulRelay() weir.Computation {
	return weir.SwiftMap(func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		n, err := seen.Get(ctx)
		if err != nil {
			return err
		}
		seen.Set(ctx, n+1)
		return out.Add("relayed", m.Payload)
	})
}

// Trace returns what the steps so far printed and resets it.
func (s *Sim) Trace() string {
	t := s.out.String()
	s.out.Reset()
	return t
}

func (s *Sim) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	line = strings.TrimPrefix(line, "controller: ")
	fmt.Fprintln(&s.out, line)
}

func (s *Sim) printf(format string, args ...any) { fmt.Fprintf(&s.out, format, args...) }

// Cycle heartbeats the workers that are not frozen and runs one controller
// cycle; the trace shows what the cycle decided (jobs started and removed,
// state transitions).
func (s *Sim) Cycle() error {
	if err := s.CycleDecide(); err != nil {
		return err
	}
	return s.CycleApply()
}

// CycleDecide heartbeats the workers that are not frozen and runs the
// observe and decide halves of a controller cycle: its state transitions
// and controls are published; its lease aborts and job starts wait for
// CycleApply, so that job epochs can run in between.
func (s *Sim) CycleDecide() error {
	if s.pendingApply != nil {
		err := fmt.Errorf("sim: the previous cycle's apply half has not run")
		s.printf("cycle error: %v\n", err)
		return err
	}
	for _, w := range s.Workers {
		w.heartbeat()
	}
	apply, err := s.Ctl.CycleDecide(s.ctx)
	if err != nil {
		s.printf("cycle error: %v\n", err)
		return err
	}
	// The jobs after the decide half (its removals done, the first
	// layout's adopted jobs installed): the apply half's starts are those
	// that differ.
	s.beforeApply = s.jobs()
	s.pendingApply = apply
	return nil
}

// CycleApply runs the apply half of the cycle CycleDecide decided; the
// trace shows the jobs it started.
func (s *Sim) CycleApply() error {
	if s.pendingApply == nil {
		err := fmt.Errorf("sim: no cycle decided")
		s.printf("cycle error: %v\n", err)
		return err
	}
	apply, before := s.pendingApply, s.beforeApply
	s.pendingApply, s.beforeApply = nil, nil
	err := apply(s.ctx)
	after := s.jobs()
	for _, p := range sortedKeys(after) {
		if after[p] != before[p] && after[p] != "" {
			s.printf("start %s as %s\n", p, after[p])
		}
	}
	if err != nil {
		s.printf("cycle error: %v\n", err)
	}
	return err
}

// jobs maps every partition to its current job id.
func (s *Sim) jobs() map[transport.PartitionID]plan.JobID {
	out := map[transport.PartitionID]plan.JobID{}
	for _, p := range s.Ctl.Partitions() {
		out[p.Partition] = p.Job
	}
	return out
}

func sortedKeys[V any](m map[transport.PartitionID]V) []transport.PartitionID {
	ks := make([]transport.PartitionID, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// Partitions lists the layout's partitions in order.
func (s *Sim) Partitions() []transport.PartitionID {
	var out []transport.PartitionID
	for _, p := range s.Ctl.Partitions() {
		out = append(out, p.Partition)
	}
	return out
}

// current returns the running (not stopped) job of partition p.
func (s *Sim) current(p transport.PartitionID) *simJob {
	for _, w := range s.Workers {
		if sj := w.jobs[p]; sj != nil && !sj.stopped && !sj.done {
			return sj
		}
	}
	return nil
}

// Epoch runs one epoch of partition p's current job (its Init first, if
// it has not run yet) and prints what it decided and did. It reports
// whether the epoch did work (false: idle, no job, or failed).
func (s *Sim) Epoch(p transport.PartitionID) bool {
	sj := s.current(p)
	if sj == nil {
		s.printf("%s: no job\n", p)
		return false
	}
	return s.step(sj, false)
}

// step runs one epoch of sj, a current job or (zombie) a removed one.
func (s *Sim) step(sj *simJob, zombie bool) bool {
	who := string(sj.spec.JobID)
	if zombie {
		who += " (zombie)"
	}
	if !sj.inited {
		sj.inited = true
		if err := sj.j.Init(s.ctx); err != nil {
			s.printf("%s: init failed: %v\n", who, err)
			sj.fail(err)
			return false
		}
		s.printf("%s: init\n", who)
	}
	d, err := sj.j.Decide(s.ctx)
	if err != nil {
		s.printf("%s: decide failed: %v\n", who, err)
		sj.fail(err)
		return false
	}
	if d.Idle && !d.Probe {
		_, err = sj.j.Apply(s.ctx, d)
		if err != nil {
			s.printf("%s: %v\n", who, err)
			sj.fail(err)
		}
		return false
	}
	s.printf("%s: epoch %s\n", who, d)
	res, err := sj.j.Apply(s.ctx, d)
	if err != nil {
		if errors.Is(err, job.ErrCrashed) {
			s.printf("%s: crashed (%v)\n", who, err)
		} else {
			s.printf("%s: apply failed: %v\n", who, err)
		}
		sj.fail(err)
		return false
	}
	if res.Committed && d.Idle {
		s.printf("%s: lease probe committed\n", who)
	}
	return !d.Idle
}

// Tick lets d of time pass with the pipeline running: the clock moves, the
// controller cycles, and every partition's job runs one epoch (an idle job
// posts its status and, when due, probes its lease).
func (s *Sim) Tick(d time.Duration) {
	s.Clock.Advance(d)
	_ = s.Cycle()
	for _, p := range s.Partitions() {
		s.Epoch(p)
	}
}

// Crash arms a crash of partition p's next epoch at point.
func (s *Sim) Crash(p transport.PartitionID, point job.CrashPoint) { s.crashes[p] = point }

// Crash implements job.Hooks.
func (s *Sim) crash(p transport.PartitionID, point job.CrashPoint) error {
	if s.crashes[p] == point {
		delete(s.crashes, p)
		return job.ErrCrashed
	}
	return nil
}

// LoseAck makes the next acknowledgement by receiving partition p get lost.
func (s *Sim) LoseAck(p transport.PartitionID) { s.faults.lose[p]++ }

// AbortLease aborts the lease of partition p's current job, as a
// controller that lost track of it would.
func (s *Sim) AbortLease(p transport.PartitionID) error {
	l := s.Ctl.Lease(p)
	if l == 0 {
		return fmt.Errorf("%s has no job", p)
	}
	s.printf("abort %s\n", l)
	return s.Store.AbortLease(s.ctx, l)
}

// ExpireLease makes the pings of partition p's lease vanish and moves the
// clock, cycle by cycle (the other leases are pinged), past the lease
// timeout: the lease expires and the controller replaces the job.
func (s *Sim) ExpireLease(p transport.PartitionID) error {
	l := s.Ctl.Lease(p)
	if l == 0 {
		return fmt.Errorf("%s has no job", p)
	}
	s.Store.DropPings(l)
	s.printf("pings of %s vanish\n", l)
	step := s.o.LeaseTimeout / 10
	for elapsed := time.Duration(0); elapsed <= s.o.LeaseTimeout+step && s.Ctl.Lease(p) == l; elapsed += step {
		s.Tick(step)
	}
	return nil
}

// Freeze keeps partition p's current job from being closed when the
// controller removes it: it stays a zombie that ZombieEpoch can step.
func (s *Sim) Freeze(p transport.PartitionID) { s.frozen[p] = true }

// ZombieEpoch runs one epoch of partition p's most recently removed job.
func (s *Sim) ZombieEpoch(p transport.PartitionID) {
	var z *simJob
	for _, w := range s.Workers {
		for _, sj := range w.zombies {
			if sj.spec.Partition.ID == p {
				z = sj
			}
		}
	}
	if z == nil {
		s.printf("%s: no zombie\n", p)
		return
	}
	s.step(z, true)
}

// AddPartition makes a source partition appear (a topic grew).
func (s *Sim) AddPartition(key string, keys []string) {
	for i, k := range keys {
		r := weir.Row{"key": k, "seq": int64(i), "event_ts": int64(i+1) * int64(time.Second)}
		s.rows[key] = append(s.rows[key], r)
		s.Source.Append(key, r)
	}
	s.printf("source partition %s appears with %d rows\n", key, len(keys))
}

// Counts returns, per key, the counts the sink committed, sorted.
func (s *Sim) Counts() (map[string][]int64, error) {
	return testconn.CountsOf(s.ctx, s.Store, "out")
}

// ExternalCounts returns the rows of the external state table key_counts
// (External): key → count.
func (s *Sim) ExternalCounts() (map[string]int64, error) {
	out := map[string]int64{}
	err := externalstate.Scan(s.ctx, s.Store, builtin.KeyCountsTable, nil, nil, 0, func(_ []byte, r map[string]any) (bool, error) {
		k, _ := r["key"].(string)
		out[k], _ = r["count"].(int64)
		return true, nil
	})
	return out, err
}

// Outputs returns the rows the sink committed, in message-id order.
func (s *Sim) Outputs() ([]weir.Row, error) {
	rows, err := testconn.ReadCollected(s.ctx, s.Store, "out")
	if err != nil {
		return nil, err
	}
	out := make([]weir.Row, len(rows))
	for i, r := range rows {
		out[i] = r.Row
	}
	return out, nil
}

// Expected returns, per key, how many source rows carry it.
func (s *Sim) Expected() map[string]int {
	out := map[string]int{}
	for _, rows := range s.rows {
		for _, r := range rows {
			out[r["key"].(string)]++
		}
	}
	return out
}

// Oracle checks the exactly-once oracle on what the sink committed: every
// key's counts are exactly 1..n once each. It returns the violations.
func (s *Sim) Oracle() ([]string, error) {
	got, err := s.Counts()
	if err != nil {
		return nil, err
	}
	return testconn.ExactlyOnce(got, s.Expected()), nil
}

// Run drives the pipeline without faults: cycles, then an epoch of every
// partition in layout order until each is idle, then a clock step — until
// done() holds or maxRounds rounds passed. It prints only what changed the
// layout or failed, and how many epochs did work.
func (s *Sim) Run(maxRounds int, done func() bool) bool {
	epochs := 0
	for round := 0; round < maxRounds; round++ {
		if done() {
			s.summarize(epochs, round)
			return true
		}
		mark := s.out.Len()
		_ = s.Cycle()
		for _, p := range s.Partitions() {
			for i := 0; i < 1000 && s.Epoch(p); i++ {
				epochs++
			}
		}
		// Keep only lines that are not routine epoch output.
		s.keepNotable(mark)
		s.Clock.Advance(100 * time.Millisecond)
	}
	s.summarize(epochs, maxRounds)
	return done()
}

func (s *Sim) summarize(epochs, rounds int) {
	s.printf("ran %d rounds, %d epochs with work\n", rounds, epochs)
}

// keepNotable drops routine lines (epochs, inits, idle jobs) written since
// mark, keeping layout changes, failures and state transitions.
func (s *Sim) keepNotable(mark int) {
	all := s.out.String()
	head, tail := all[:mark], all[mark:]
	var kept []string
	for _, l := range strings.Split(strings.TrimRight(tail, "\n"), "\n") {
		if l == "" || strings.Contains(l, ": epoch ") || strings.HasPrefix(l, "  ") ||
			strings.HasSuffix(l, ": init") || strings.HasSuffix(l, ": no job") || strings.HasSuffix(l, "lease probe committed") {
			continue
		}
		kept = append(kept, l)
	}
	s.out.Reset()
	s.out.WriteString(head)
	for _, l := range kept {
		s.out.WriteString(l + "\n")
	}
}

// BlockListing makes the source's next listing block until ReleaseListing
// (a metadata call that takes longer than the lease timeout).
func (s *Sim) BlockListing() { s.listing.block() }

// ReleaseListing lets a blocked listing return, and waits until the
// controller's background lister has finished it.
func (s *Sim) ReleaseListing() {
	before := s.Ctl.Stats().SourceListings
	s.listing.release()
	for deadline := time.Now().Add(10 * time.Second); s.Ctl.Stats().SourceListings == before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// gatedSource is the simulation's source with a listing that can be made
// to block.
type gatedSource struct {
	*testconn.Source
	mu   sync.Mutex
	gate chan struct{}
}

func (g *gatedSource) block() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedSource) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedSource) Partitions(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Source.Partitions(ctx)
}

// Completed reports whether the pipeline reached "completed".
func (s *Sim) Completed() bool { return s.Ctl.State() == controller.Completed }

// Worker is a simulated worker: it creates jobs when the controller starts
// them but runs nothing by itself; the simulation steps them.
type Worker struct {
	id          string
	sim         *Sim
	incarnation int
	lastBeat    time.Time
	frozen      bool
	draining    bool
	jobs        map[transport.PartitionID]*simJob
	zombies     []*simJob
}

var _ controller.Worker = (*Worker)(nil)

func (w *Worker) ID() string { return w.id }

func (w *Worker) Incarnation() int { return w.incarnation }

func (w *Worker) AliveAt(now time.Time, timeout time.Duration) bool {
	return now.Sub(w.lastBeat) < timeout
}

func (w *Worker) Load() int {
	n := 0
	for _, sj := range w.jobs {
		if !sj.done {
			n++
		}
	}
	return n
}

func (w *Worker) heartbeat() {
	if !w.frozen {
		w.lastBeat = w.sim.Clock.Now()
	}
}

// Start implements controller.Worker: the job is created now and stepped
// by the simulation.
func (w *Worker) Start(spec plan.JobSpec) (controller.Handle, error) {
	s := w.sim
	pl := s.Plan
	if spec.Plan != nil {
		pl = spec.Plan // the controller's layout (a rescale changes it)
	}
	j, err := job.New(job.Config{
		Plan: pl, Comp: spec.Comp, Partition: spec.Partition, JobID: spec.JobID, Lease: spec.Lease,
		Store: s.Store, Hub: s.Hub, Board: s.Board, Hooks: hooks{s},
		Rand: rand.New(rand.NewPCG(spec.Seed, uint64(spec.Lease))), Logf: s.logf,
	})
	if err != nil {
		return nil, err
	}
	if w.jobs == nil {
		w.jobs = map[transport.PartitionID]*simJob{}
	}
	sj := &simJob{spec: spec, j: j, worker: w}
	w.jobs[spec.Partition.ID] = sj
	return sj, nil
}

// Restart models a worker process restart: every job of the old
// incarnation ends, and the worker heartbeats again as a new incarnation.
func (w *Worker) Restart() {
	for _, sj := range w.jobs {
		sj.close()
	}
	w.jobs = nil
	w.incarnation++
	w.frozen = false
	w.lastBeat = w.sim.Clock.Now()
}

// Freeze stops the worker's heartbeats (its jobs keep existing).
func (w *Worker) Freeze() { w.frozen = true }

type hooks struct{ s *Sim }

func (h hooks) Crash(p transport.PartitionID, point job.CrashPoint) error { return h.s.crash(p, point) }

// simJob is a job the simulation steps; it is its own controller.Handle.
// simPool is the controller's view of the simulation's workers, which may
// grow (AddWorker).
type simPool struct{ s *Sim }

func (p simPool) Workers() []controller.Worker {
	out := make([]controller.Worker, len(p.s.Workers))
	for i, w := range p.s.Workers {
		out[i] = w
	}
	return out
}

// AddWorker adds a live worker (one joining the cluster).
func (s *Sim) AddWorker() *Worker {
	w := &Worker{id: fmt.Sprintf("w%d", len(s.Workers)), sim: s, lastBeat: s.Clock.Now()}
	s.Workers = append(s.Workers, w)
	return w
}

// Draining implements controller.Drainer.
func (w *Worker) Draining() bool { return w.draining }

// Spread returns each worker's number of running jobs, in worker order.
func (s *Sim) Spread() []int {
	out := make([]int, len(s.Workers))
	for i, w := range s.Workers {
		out[i] = w.Load()
	}
	return out
}

type simJob struct {
	spec    plan.JobSpec
	j       *job.Job
	worker  *Worker
	inited  bool
	stopped bool
	done    bool
	err     error
}

// Stop implements controller.Handle. A stopped job is closed at once —
// unless its partition is frozen (Sim.Freeze): then it stays, a zombie.
func (sj *simJob) Stop() {
	if sj.stopped {
		return
	}
	sj.stopped = true
	if sj.worker.sim.frozen[sj.spec.Partition.ID] {
		delete(sj.worker.sim.frozen, sj.spec.Partition.ID)
		sj.worker.zombies = append(sj.worker.zombies, sj)
		return
	}
	sj.close()
}

// Done implements controller.Handle.
func (sj *simJob) Done() (bool, error) { return sj.done, sj.err }

// Finish implements controller.Finisher: a simulated job has no epoch in
// flight between steps, so it finishes at once (its last commit stands).
func (sj *simJob) Finish() {
	sj.worker.sim.printf("finish %s on %s\n", sj.spec.JobID, sj.worker.id)
	sj.close()
}

func (sj *simJob) fail(err error) {
	sj.err = err
	sj.close()
}

func (sj *simJob) close() {
	if sj.done {
		return
	}
	sj.done = true
	_ = sj.j.Close()
}

// hubFaults loses the next acknowledgements of chosen receivers.
type hubFaults struct {
	lose map[transport.PartitionID]int
}

func (f *hubFaults) LoseAck(p transport.PartitionID, _ msgid.ID) bool {
	if f.lose[p] > 0 {
		f.lose[p]--
		return true
	}
	return false
}

func (f *hubFaults) Redeliver(transport.PartitionID, msgid.ID) bool { return false }

// Store is the simulation's store: Pebble on an in-memory filesystem, with
// vanishing lease pings (faultinject.LeaseAudit) and commits held back:
// HoldNext makes the next epoch commit of a partition report an unknown
// outcome without applying it, and Land lets the held attempts land.
type Store struct {
	*faultinject.LeaseAudit
	raw  *pstore.Store
	hold map[string]bool
	held []*store.Txn
}

func newStore(raw *pstore.Store) *Store {
	return &Store{LeaseAudit: faultinject.NewLeaseAudit(raw), raw: raw, hold: map[string]bool{}}
}

// HoldNext holds the next epoch commit of partition p.
func (s *Store) HoldNext(p transport.PartitionID) { s.hold[string(p)] = true }

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, txn *store.Txn) error {
	if p := epochPartition(txn); p != "" && s.hold[p] {
		delete(s.hold, p)
		s.held = append(s.held, txn.Clone())
		return &store.AmbiguousError{Err: errors.New("sim: the commit is still on its way")}
	}
	return s.LeaseAudit.Commit(ctx, txn)
}

// Land lets every held attempt land now and returns how each went.
func (s *Store) Land(ctx context.Context) []error {
	held := s.held
	s.held = nil
	out := make([]error, len(held))
	for i, txn := range held {
		out[i] = s.LeaseAudit.Commit(ctx, txn)
	}
	return out
}

// epochPartition returns the partition of a job's lease-fenced commit (the
// key of its partition_transactions row), or "".
func epochPartition(txn *store.Txn) string {
	if len(txn.Prerequisites()) == 0 {
		return ""
	}
	for _, m := range txn.Mutations() {
		if m.Table == store.PartitionTransactions {
			return string(m.Key)
		}
	}
	return ""
}

// recordingSink is an at-most-once sink that records, synchronously, every
// output it is handed (the point of the at-most-once scenarios is what the
// engine hands it, not what a network writes).
type recordingSink struct{ sim *Sim }

func (r *recordingSink) Init(context.Context, connector.SinkContext) error { return nil }
func (r *recordingSink) Distribute(m *weir.Message, done func(error)) {
	r.sim.Handed = append(r.sim.Handed, m.ID)
	done(nil)
}
func (r *recordingSink) Sync(context.Context, *store.Txn) error { return nil }
func (r *recordingSink) Commit(context.Context)                 {}
func (r *recordingSink) Close() error                           { return nil }
func (r *recordingSink) DeliversAtMostOnce() bool               { return true }
