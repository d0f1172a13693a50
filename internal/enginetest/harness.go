// Package enginetest is the harness of weir's scenario tests: it builds a
// keyed-counter pipeline over the real engine (Pebble store on disk,
// controller, workers, in-process transport), runs it to completion under
// injected faults, and checks the exactly-once oracle: every key's emitted
// counts are exactly 1..n, once each.
package enginetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/worker"
)

// Options shape the test pipeline:
//
//	source "events" (testconn) → Reader (TransformOrderedSource, or
//	SwiftOrderedSource with SwiftReader) → stream "words" → Counter
//	(Transform, group_by key) → stream "counts" → sink "out" (sync, collects
//	into the store)
type Options struct {
	Seed              uint64
	Keys              int
	Messages          int
	SourcePartitions  int
	CounterPartitions int
	SwiftReader       bool
	Mode              plan.ProcessingMode
	Compact           bool
	Workers           int
	BatchRows         int
	Hooks             job.Hooks
	// Clock is the store's clock; nil means a manual clock frozen at start.
	Clock clock.Clock
	// Store, if set, is used instead of opening a Pebble store in a temp dir.
	Store store.Store
	// Timers replaces Counter's code with TimerCounter: each message sets an
	// event-time timer one second after its event time, and the count is
	// emitted when the timer fires.
	Timers bool
	// ExtraStage inserts a SwiftMap passthrough between Reader and Counter.
	ExtraStage bool
	// LeaseTimeout for the controller (default 5s of store clock).
	LeaseTimeout time.Duration
	// LostTimeout: a job or worker silent this long is lost (default LeaseTimeout/2).
	LostTimeout time.Duration
	// Wrap, if set, wraps the store the engine uses (fault injection).
	Wrap func(store.Store) store.Store
	// StateCacheBytes bounds Counter's state cache (0: the default).
	StateCacheBytes int
	// RestartBackoff and RestartBackoffMax configure the controller's
	// restart backoff of failed jobs. Zero: no backoff, as the harness's
	// clock is frozen unless a test moves it (a crashed job restarts in the
	// next cycle).
	RestartBackoff, RestartBackoffMax time.Duration
	// SourceRelistPeriod for the controller (default 10s of store clock).
	SourceRelistPeriod time.Duration
	// External replaces Counter by ExternalCounter("Counter"): the counts
	// live in the external state table ExternalTable.
	External bool
	// SecondWriter adds a computation Counter2, an ExternalCounter of this
	// owner reading "words" and delivering to sink "out2": owner "Counter2"
	// writes a key range disjoint from Counter's, owner "Counter" the same
	// rows (read-modify-writes that race Counter's).
	SecondWriter string
	// Uint32Bucket makes Reader add a column "bucket" holding a uint32
	// derived from the key, and Counter group by (bucket, key): a
	// non-canonical integer first in the group_by key, whose routing must
	// not change when an output is re-sent from the outbox (decoded as
	// uint64).
	Uint32Bucket bool
	// Poison, when positive, makes Counter fail on every input whose seq is
	// a multiple of Poison — after counting it and emitting its count, so
	// that the failed call has effects to undo — with a dead-letter stream
	// "dead" delivered to the collecting sink "dead". Poisoned lists those
	// seqs; Expected leaves them out.
	Poison int
}

func (o *Options) defaults() {
	if o.Keys == 0 {
		o.Keys = 10
	}
	if o.Messages == 0 {
		o.Messages = 500
	}
	if o.SourcePartitions == 0 {
		o.SourcePartitions = 2
	}
	if o.CounterPartitions == 0 {
		o.CounterPartitions = 3
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.BatchRows == 0 {
		o.BatchRows = 37
	}
	if o.Clock == nil {
		o.Clock = clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
}

// Harness is a running test pipeline.
type Harness struct {
	T       testing.TB
	Opts    Options
	Store   store.Store
	Plan    *plan.Plan
	Hub     *transport.Hub
	Board   *board.Board
	Ctl     *controller.Controller
	Workers []*worker.Worker
	Source  *testconn.Source
	// Expected maps each key to how many input messages carry it.
	Expected map[string]int
	// Poisoned holds the seqs of the inputs Counter fails on (Options.Poison).
	Poisoned map[int64]bool

	rows  map[string][]weir.Row
	logMu sync.Mutex
	logs  []string
}

// New builds the pipeline; nothing runs until Run.
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	o.defaults()
	h := &Harness{T: t, Opts: o, Expected: map[string]int{}, Poisoned: map[int64]bool{}}
	st := o.Store
	if st == nil {
		s, err := pstore.Open(t.TempDir(), pstore.Options{Clock: o.Clock})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		st = s
	}
	if o.Wrap != nil {
		st = o.Wrap(st)
	}
	h.Store = st

	rnd := rand.New(rand.NewPCG(o.Seed, 7))
	parts := map[string][]weir.Row{}
	for i := 0; i < o.Messages; i++ {
		p := fmt.Sprintf("p%d", i%o.SourcePartitions)
		k := fmt.Sprintf("k%03d", rnd.IntN(o.Keys))
		parts[p] = append(parts[p], weir.Row{"key": k, "seq": int64(i), "event_ts": int64(i) * int64(time.Millisecond)})
		if o.Poison > 0 && i%o.Poison == 0 {
			h.Poisoned[int64(i)] = true
			continue
		}
		h.Expected[k]++
	}
	h.Source = testconn.NewSource(parts)
	h.rows = parts

	readerKind := weir.KindTransform
	if o.SwiftReader {
		readerKind = weir.KindSwiftMap
	}
	batch := plan.BatchPlan{MaxRows: o.BatchRows, EmptyBackoff: 2 * time.Millisecond}
	counterIn := "words"
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"Reader": {
			Code: builtin.Passthrough(readerKind), Source: h.Source, SourceStream: "events",
			Outputs: []string{"words"}, Batch: batch,
		},
		"Counter": {
			Code: builtin.Counter(), GroupBy: []string{"key"}, Partitions: o.CounterPartitions,
			Mode: o.Mode, CompactDedup: o.Compact, Inputs: []string{"words"}, Outputs: []string{"counts"},
			Batch: batch, StateCacheBytes: o.StateCacheBytes,
			Sinks: []plan.SinkPlan{{ID: "out", InputStream: "counts", New: func() (connector.Sink, error) {
				return testconn.NewCollectSink("out"), nil
			}}},
		},
	}}
	if o.External {
		pl.Computations["Counter"] = externalCounterPlan("Counter", "Counter", "words", "counts", "out", o, batch)
	}
	if o.SecondWriter != "" {
		pl.Computations["Counter2"] = externalCounterPlan("Counter2", o.SecondWriter, "words", "counts2", "out2", o, batch)
	}
	if o.Timers {
		c := pl.Computations["Counter"]
		c.Code = testconn.TimerCounter()
		c.Timers = map[string]plan.TimerPlan{"fire": {}}
	}
	if o.Poison > 0 {
		c := pl.Computations["Counter"]
		c.Code = poisonedCounter(o.Poison)
		c.Outputs = append(c.Outputs, "dead")
		c.DeadLetterStream = "dead"
		c.Sinks = append(c.Sinks, plan.SinkPlan{ID: "dead", InputStream: "dead", New: func() (connector.Sink, error) {
			return testconn.NewCollectSink("dead"), nil
		}})
	}
	if o.Uint32Bucket {
		pl.Computations["Reader"].Code = testconn.Uint32Bucketer(readerKind)
		pl.Computations["Counter"].GroupBy = []string{"bucket", "key"}
	}
	if o.ExtraStage {
		pl.Computations["Relay"] = &plan.CompPlan{
			Code: builtin.Passthrough(weir.KindSwiftMap), GroupBy: []string{"key"}, Partitions: 2,
			Inputs: []string{"words"}, Outputs: []string{"relayed"}, Batch: batch,
		}
		counterIn = "relayed"
		pl.Computations["Counter"].Inputs = []string{counterIn}
	}
	h.Plan = pl
	h.Hub = transport.NewHub(64 << 10)
	h.Board = board.NewBoard()
	h.Workers = h.newWorkers()
	h.Ctl = h.NewController()
	t.Cleanup(h.stopAll)
	return h
}

// newWorkers builds the harness's workers over its current plan, store,
// hub and board (a process restart builds new ones).
func (h *Harness) newWorkers() []*worker.Worker {
	env := worker.Env{Plan: h.Plan, Store: h.Store, Hub: h.Hub, Board: h.Board, Hooks: h.Opts.Hooks, Logf: h.logf}
	ws := make([]*worker.Worker, h.Opts.Workers)
	for i := range ws {
		ws[i] = worker.New(fmt.Sprintf("w%d", i), h.Store, env)
	}
	return ws
}

// NewController builds a controller over the harness's plan, store, hub,
// board and workers with the harness's options (tests that replace one of
// them, or simulate a process restart, call it again).
func (h *Harness) NewController() *controller.Controller {
	h.T.Helper()
	o := h.Opts
	lt := o.LeaseTimeout
	if lt == 0 {
		lt = 5 * time.Second
	}
	lost := o.LostTimeout
	if lost == 0 {
		lost = lt / 2
	}
	backoff := o.RestartBackoff
	if backoff == 0 {
		backoff = -1
	}
	ctl, err := controller.New(controller.Config{
		Plan: h.Plan, Store: h.Store, Hub: h.Hub, Board: h.Board, Workers: worker.ForController(h.Workers),
		LeaseTimeout: lt, LeasePingPeriod: lt / 5, LostWorkerTimeout: lost,
		RestartBackoff: backoff, RestartBackoffMax: o.RestartBackoffMax, SourceRelistPeriod: o.SourceRelistPeriod,
		Rand: rand.New(rand.NewPCG(o.Seed, 11)), Logf: h.logf,
		Warnf: func(format string, args ...any) { h.logf("warn: "+format, args...) },
	})
	if err != nil {
		h.T.Fatalf("controller: %v", err)
	}
	return ctl
}

func (h *Harness) logf(format string, args ...any) {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	h.logs = append(h.logs, fmt.Sprintf(format, args...))
}

// Logs returns the controller's and jobs' log lines so far.
func (h *Harness) Logs() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return strings.Join(h.logs, "\n")
}

func (h *Harness) stopAll() {
	for _, w := range h.Workers {
		w.Restart()
	}
}

// Cycle runs one controller cycle and heartbeats every unfrozen worker.
func (h *Harness) Cycle(ctx context.Context) error {
	for _, w := range h.Workers {
		w.Heartbeat()
	}
	return h.Ctl.Cycle(ctx)
}

// RunUntil cycles the controller until cond holds or timeout (real time)
// passes; between cycles it calls between (if not nil).
func (h *Harness) RunUntil(ctx context.Context, timeout time.Duration, cond func() bool, between func()) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v in state %s; partitions: %+v; stats: %+v\nlogs:\n%s",
				timeout, h.Ctl.State(), h.Ctl.Partitions(), h.Ctl.Stats(), tail(h.Logs(), 40))
		}
		if err := h.Cycle(ctx); err != nil {
			return err
		}
		if between != nil {
			between()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// RunToCompletion runs until the pipeline is completed.
func (h *Harness) RunToCompletion(ctx context.Context, timeout time.Duration) error {
	return h.RunUntil(ctx, timeout, func() bool { return h.Ctl.State() == controller.Completed }, nil)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Counts returns, per key, the counts the sink committed, sorted.
func (h *Harness) Counts(ctx context.Context) (map[string][]int64, error) {
	return testconn.CountsOf(ctx, h.Store, "out")
}

// CheckExactlyOnce verifies the oracle: for every key with n inputs, the
// committed counts are exactly 1..n, once each. It returns a description
// of every violation (empty if none).
func (h *Harness) CheckExactlyOnce(ctx context.Context) ([]string, error) {
	got, err := h.Counts(ctx)
	if err != nil {
		return nil, err
	}
	return testconn.ExactlyOnce(got, h.Expected), nil
}

// RequireExactlyOnce reports every violation of the exactly-once oracle as
// a test error.
func (h *Harness) RequireExactlyOnce(ctx context.Context) {
	h.T.Helper()
	bad, err := h.CheckExactlyOnce(ctx)
	if err != nil {
		h.T.Fatal(err)
	}
	for _, b := range bad {
		h.T.Error(b)
	}
}

// CheckAtLeastOnce verifies the at-least-once oracle: every count 1..n is
// present. A re-processed input increments the (consistent) state again, so
// duplicates show up as extra outputs with counts above n; dups counts the
// outputs beyond n.
func (h *Harness) CheckAtLeastOnce(ctx context.Context) (dups int, bad []string, err error) {
	got, err := h.Counts(ctx)
	if err != nil {
		return 0, nil, err
	}
	for k, n := range h.Expected {
		seen := map[int64]int{}
		for _, c := range got[k] {
			seen[c]++
		}
		for i := 1; i <= n; i++ {
			if seen[int64(i)] == 0 {
				bad = append(bad, fmt.Sprintf("key %s: count %d missing", k, i))
			}
		}
		dups += len(got[k]) - n
	}
	sort.Strings(bad)
	return dups, bad, nil
}

// sourceRows returns the generated input, per source partition.
func (h *Harness) sourceRows() map[string][]weir.Row { return h.rows }

// poisonedCounter is builtin.Counter failing, after it counted and emitted,
// on every input whose seq is a multiple of every (Options.Poison).
func poisonedCounter(every int) weir.Computation {
	c := builtin.Counter()
	count := c.OnMessage
	c.OnMessage = func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		if err := count(ctx, m, out); err != nil {
			return err
		}
		if seq, _ := m.Payload["seq"].(int64); seq%int64(every) == 0 {
			return fmt.Errorf("poison: seq %d", seq)
		}
		return nil
	}
	return c
}

// CheckDeadLetters verifies that the sink "dead" committed one dead letter
// per poisoned input, each naming it (Options.Poison).
func (h *Harness) CheckDeadLetters(ctx context.Context) ([]string, error) {
	rows, err := testconn.ReadCollected(ctx, h.Store, "dead")
	if err != nil {
		return nil, err
	}
	var bad []string
	seen := map[int64]int{}
	for _, r := range rows {
		payload, _ := r.Row["payload"].(map[string]any)
		seq, ok := payload["seq"].(int64)
		if !ok || r.Row["computation"] != "Counter" || !strings.Contains(fmt.Sprint(r.Row["error"]), "poison: seq") {
			bad = append(bad, fmt.Sprintf("dead letter %s is not a poisoned input's: %v", r.ID, r.Row))
			continue
		}
		seen[seq]++
	}
	for seq := range h.Poisoned {
		if seen[seq] != 1 {
			bad = append(bad, fmt.Sprintf("poisoned input seq %d: %d dead letters, want 1", seq, seen[seq]))
		}
	}
	for seq, n := range seen {
		if !h.Poisoned[seq] {
			bad = append(bad, fmt.Sprintf("input seq %d dead-lettered %d times, but it is not poisoned", seq, n))
		}
	}
	sort.Strings(bad)
	return bad, nil
}
