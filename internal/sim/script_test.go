package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// TestScripts runs the protocol scripts in testdata/: each drives a
// simulated pipeline step by step and prints what every step decided. The
// golden output is regenerated with
//
//	go test ./internal/sim -run TestScripts -rewrite
//
// Commands (arguments in key=value form; a bare word is a partition):
//
//	new sources=p0:a,b,a;p1:c [swift] [relay] [batching] [timers] [amo] [tail]
//	    [infinite] [counters=N] [workers=N] [batch=N] [buffer=BYTES]
//	    [state-cache=BYTES] [lease-timeout=D] [lease-check=D] [quiesce-timeout=D] [tail]
//	    [stateful-relay] [transform-relay] [background-listing]
//	cycle [n=N]                 controller cycles
//	epoch P [P...]              one epoch of each partition's current job
//	run [rounds=N]              cycles and epochs until completed (or N rounds)
//	advance-clock d=D
//	tick d=D [n=N]              move the clock, cycle, one epoch of every job
//	crash P at=POINT            arm a crash of P's next epoch at a named point
//	lose-ack P                  P's next acknowledgement upstream is lost
//	hold-commit P / land        P's next commit answers "unknown" and lands at land
//	abort-lease P / expire-lease P
//	freeze P / zombie-epoch P   keep P's job when removed; step it later
//	restart-worker W / freeze-worker W
//	add-partition KEY rows=a,b  a source partition appears
//	block-listing / release-listing   (background-listing) a slow listing
//	inspect P                   the job's bookkeeping (state cache, timers...)
//	pause / stop / start / state
//	rescale C n=N               controller.Rescale: computation C onto N partitions
//	handover [drop=P,P] [misfit=P]   a new controller adopts the running jobs
//	counts / oracle / handed    what the sink committed (or was handed)
//	outbox P / dedup C / mailbox P / controls C / status P
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *Sim
		defer func() {
			if s != nil {
				s.Close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				if s != nil {
					s.Close()
				}
				var err error
				if s, err = New(optionsFrom(t, d)); err != nil {
					t.Fatal(err)
				}
				return "ok\n"
			}
			if s == nil {
				t.Fatalf("%s: no pipeline yet (start with new)", d.Pos)
			}
			return run(t, s, d)
		})
	})
}

func optionsFrom(t *testing.T, d *datadriven.TestData) Options {
	o := Options{Sources: map[string][]string{}}
	for _, a := range d.CmdArgs {
		v := strings.Join(a.Vals, ",")
		switch a.Key {
		case "sources":
			for _, part := range strings.Split(v, ";") {
				k, rows, _ := strings.Cut(part, ":")
				if rows == "" {
					o.Sources[k] = nil
					continue
				}
				o.Sources[k] = strings.Split(rows, ",")
			}
		case "swift":
			o.SwiftReader = true
		case "relay":
			o.Relay = true
		case "batching":
			o.Relay, o.Batching = true, true
		case "timers":
			o.Timers = true
		case "amo":
			o.AtMostOnceSink = true
		case "tail":
			o.Tail = true
		case "stateful-relay":
			o.Relay, o.StatefulRelay = true, true
		case "transform-relay":
			o.Relay, o.TransformRelay = true, true
		case "background-listing":
			o.BackgroundListing = true
		case "infinite":
			o.Infinite = true
		case "external":
			o.External = true
		case "counters":
			o.Counters = atoi(t, v)
		case "workers":
			o.Workers = atoi(t, v)
		case "batch":
			o.BatchRows = atoi(t, v)
		case "buffer":
			o.BufferBytes = atoi(t, v)
		case "state-cache":
			o.StateCacheBytes = atoi(t, v)
		case "lease-timeout":
			o.LeaseTimeout = dur(t, v)
		case "lease-check":
			o.LeaseCheckPeriod = dur(t, v)
		case "quiesce-timeout":
			o.QuiesceTimeout = dur(t, v)
		case "balance":
			o.Balance = true
		default:
			t.Fatalf("%s: new: unknown argument %q", d.Pos, a.Key)
		}
	}
	return o
}

func run(t *testing.T, s *Sim, d *datadriven.TestData) string {
	ctx := context.Background()
	arg := func(key string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				return strings.Join(a.Vals, ",")
			}
		}
		return ""
	}
	// bare returns the arguments without values: partitions, workers.
	bare := func() []string {
		var out []string
		for _, a := range d.CmdArgs {
			if len(a.Vals) == 0 {
				out = append(out, a.Key)
			}
		}
		return out
	}
	part := func() transport.PartitionID {
		b := bare()
		if len(b) != 1 {
			t.Fatalf("%s: %s needs one partition", d.Pos, d.Cmd)
		}
		return transport.PartitionID(b[0])
	}
	switch d.Cmd {
	case "cycle":
		n := 1
		if v := arg("n"); v != "" {
			n = atoi(t, v)
		}
		for i := 0; i < n; i++ {
			_ = s.Cycle()
		}
	case "cycle-decide":
		_ = s.CycleDecide()
	case "cycle-apply":
		_ = s.CycleApply()
	case "epoch":
		for _, p := range bare() {
			s.Epoch(transport.PartitionID(p))
		}
	case "run":
		rounds := 200
		if v := arg("rounds"); v != "" {
			rounds = atoi(t, v)
		}
		s.Run(rounds, s.Completed)
	case "advance-clock":
		s.Clock.Advance(dur(t, arg("d")))
	case "tick":
		n := 1
		if v := arg("n"); v != "" {
			n = atoi(t, v)
		}
		for i := 0; i < n; i++ {
			s.Tick(dur(t, arg("d")))
		}
	case "crash":
		s.Crash(part(), job.CrashPoint(arg("at")))
	case "lose-ack":
		s.LoseAck(part())
	case "hold-commit":
		s.Store.HoldNext(part())
	case "land":
		for _, err := range s.Store.Land(ctx) {
			s.printf("landed: %s\n", errString(err))
		}
	case "abort-lease":
		if err := s.AbortLease(part()); err != nil {
			s.printf("error: %v\n", err)
		}
	case "expire-lease":
		if err := s.ExpireLease(part()); err != nil {
			s.printf("error: %v\n", err)
		}
	case "freeze":
		s.Freeze(part())
	case "zombie-epoch":
		s.ZombieEpoch(part())
	case "restart-worker", "freeze-worker":
		w := s.worker(t, part())
		if d.Cmd == "restart-worker" {
			w.Restart()
		} else {
			w.Freeze()
		}
	case "handover":
		var drop []transport.PartitionID
		if v := arg("drop"); v != "" {
			for _, p := range strings.Split(v, ",") {
				drop = append(drop, transport.PartitionID(p))
			}
		}
		if err := s.Handover(drop, transport.PartitionID(arg("misfit"))); err != nil {
			s.printf("error: %v\n", err)
		}
	case "rescale":
		if err := s.Ctl.Rescale(ctx, string(part()), atoi(t, arg("n"))); err != nil {
			s.printf("error: %v\n", err)
		}
	case "add-worker":
		w := s.AddWorker()
		s.printf("%s joined\n", w.id)
	case "drain-worker":
		s.worker(t, part()).draining = true
	case "spread":
		s.printf("jobs per worker: %v\n", s.Spread())
	case "block-listing":
		s.BlockListing()
	case "release-listing":
		s.ReleaseListing()
	case "inspect":
		if sj := s.current(part()); sj != nil {
			in := sj.j.Inspect()
			s.printf("%s: %d states cached (%d bytes), %d timers, %d undelivered, %d offers waiting\n",
				part(), in.CachedStates, in.CachedStateBytes, in.Timers, in.Undelivered, in.WaitingOffers)
		} else {
			s.printf("%s: no job\n", part())
		}
	case "add-partition":
		s.AddPartition(string(part()), strings.Split(arg("rows"), ","))
	case "pause", "stop", "start":
		target := map[string]controller.State{"pause": controller.Paused, "stop": controller.Stopped, "start": controller.Working}[d.Cmd]
		if err := s.Ctl.SetTarget(target); err != nil {
			s.printf("error: %v\n", err)
		}
	case "state":
		s.printf("%s\n", s.Ctl.State())
	case "counts":
		c, err := s.Counts()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(c)) {
			s.printf("%s: %v\n", k, c[k])
		}
	case "table":
		c, err := s.ExternalCounts()
		if err != nil {
			t.Fatal(err)
		}
		if len(c) == 0 {
			s.printf("key_counts is empty\n")
		}
		for _, k := range slices.Sorted(maps.Keys(c)) {
			s.printf("key_counts %s: %d\n", k, c[k])
		}
	case "oracle":
		bad, err := s.Oracle()
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) == 0 {
			s.printf("exactly once: every key's counts are 1..n, once each\n")
		}
		for _, b := range bad {
			s.printf("VIOLATION %s\n", b)
		}
	case "handed":
		s.printf("%d handed: %v\n", len(s.Handed), s.Handed)
	case "outbox":
		n := s.count(t, store.OutputMessages, tables.OutboxPrefix(string(part())))
		s.printf("%s outbox: %d outputs\n", part(), n)
	case "dedup":
		comp := string(part())
		n := s.count(t, store.InputMessages, []byte(comp+"\x00")) + s.count(t, store.CompactInputMessages, []byte(comp+"\x00"))
		s.printf("%s dedup rows: %d\n", comp, n)
		for _, f := range s.frontiers(t, comp) {
			s.printf("%s frontier %s\n", comp, f)
		}
	case "mailbox":
		s.printf("%s mailbox: %d unacknowledged\n", part(), s.Hub.Pending(part()))
	case "controls":
		c := s.Board.Control(string(part()))
		var streams []string
		for st := range c.InputSystemWM {
			streams = append(streams, st)
		}
		sort.Strings(streams)
		for _, st := range streams {
			s.printf("%s input %s: system watermark %s\n", part(), st, tsName(c.InputSystemWM[st]))
		}
		s.printf("%s event watermark %s, draining %v, upstream done %v\n", part(), c.EventWM.Format(time.RFC3339), c.Draining, c.UpstreamDone)
		if c.Quiesce {
			s.printf("%s quiesce (a rescale: take no input, deliver the outbox)\n", part())
		}
	case "status":
		st, ok := s.Board.Status(part())
		if !ok {
			s.printf("%s: no status\n", part())
			break
		}
		var streams []string
		for k := range st.SystemWM {
			streams = append(streams, k)
		}
		sort.Strings(streams)
		for _, k := range streams {
			s.printf("%s (%s) output %s: bound %s\n", part(), st.Job, k, tsName(st.SystemWM[k]))
		}
		s.printf("%s (%s): quiet %v, drained %v, quiesced %v\n", part(), st.Job, st.Quiet, st.Drained, st.Quiesced)
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	out := s.Trace()
	if out == "" {
		return "ok\n"
	}
	return out
}

func (s *Sim) worker(t *testing.T, id transport.PartitionID) *Worker {
	for _, w := range s.Workers {
		if w.ID() == string(id) {
			return w
		}
	}
	t.Fatalf("no worker %s", id)
	return nil
}

func (s *Sim) count(t *testing.T, table store.Table, prefix []byte) int {
	n := 0
	err := s.Store.Scan(context.Background(), store.Range{Table: table, Lo: prefix, Hi: tables.PrefixEnd(prefix)}, func(_, _ []byte) bool {
		n++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tsName prints a store timestamp as its second and counter, stable across
// runs (the simulated clock starts at the same instant).
func tsName(ts store.Timestamp) string {
	if ts == 0 {
		return "0"
	}
	if uint64(ts) >= 1<<62 {
		return "∞"
	}
	sec := uint64(ts) >> store.TimestampCounterBits
	n := uint64(ts) & (1<<store.TimestampCounterBits - 1)
	return fmt.Sprintf("%s+%d", time.Unix(int64(sec), 0).UTC().Format("15:04:05"), n)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func dur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("not a duration: %q", s)
	}
	return d
}

// frontiers lists comp's dedup frontiers: stream, sender (and origin), key
// range and id.
func (s *Sim) frontiers(t *testing.T, comp string) []string {
	fs, err := tables.Frontiers(context.Background(), s.Store, comp)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		rng := fmt.Sprintf("[%016x, %016x)", f.Range.Lo, f.Range.Hi)
		if f.Range.ToEnd {
			rng = fmt.Sprintf("[%016x, end)", f.Range.Lo)
		}
		from := f.Sender
		if f.Origin != "" {
			from += " (origin " + f.Origin + ")"
		}
		out = append(out, fmt.Sprintf("%s from %s, keys %s: %s", f.Stream, from, rng, f.ID))
	}
	return out
}
