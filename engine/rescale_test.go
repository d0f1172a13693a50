package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
)

// rescaleSpec is the counter with a keyed Relay (a Passthrough Transform)
// between the Reader and the Counter, both rescalable: rescaling Relay
// changes the senders the Counter's frontiers know, rescaling the Counter
// restarts Relay's jobs, which route by its layout. The source is
// unbounded: the pipeline runs until the test kills it.
func rescaleSpec(t *testing.T) *spec.Pipeline {
	p := example(t, "counter")
	p.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = false
	p.Computations["Reader"].MaxRowsPerBatch = 50
	p.Computations["Relay"] = &spec.Computation{
		ComputationClassName: "Passthrough", GroupBy: []string{"key"},
		InputStreamIDs: []string{"words"}, OutputStreamIDs: []string{"relayed"},
		MaxRowsPerBatch: 40, EmptyBatchBackoff: spec.Duration(5 * time.Millisecond),
	}
	p.Computations["Counter"].InputStreamIDs = []string{"relayed"}
	p.Streams["relayed"] = &spec.Stream{}
	p.SetDefaults()
	return p
}

// TestRescaleExactlyOnce (issue 27, item 1): the two keyed computations of
// a running pipeline are rescaled in turn through 1, 2, 7 and 16
// partitions while input keeps arriving, and the process is killed at
// each step of the protocol — right after the rescale is asked for (the
// target is persisted; the next process carries it out), while the
// computation quiesces (nothing switched; the next process starts again),
// and right after the switch (the next process runs the new layout). Each
// key's counts are 1..n, once each, at the end.
func TestRescaleExactlyOnce(t *testing.T) {
	f := newFixture(t, 3)
	f.writeKeys(t, 1500, 40, 1)
	p := rescaleSpec(t)
	var e *Engine
	var kill func()
	start := func() {
		t.Helper()
		var err error
		e, err = New(context.Background(), Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := e.Run(ctx); done <- err }()
		kill = func() { cancel(); <-done }
	}
	pauses := []string{}
	report := func() {
		done, _ := e.Controller().Rescales()
		for _, r := range done {
			pauses = append(pauses, fmt.Sprintf("%s %d→%d: %v (quiesce %v)", r.Computation, r.From, r.To,
				r.Pause().Round(time.Millisecond), r.Quiesced.Sub(r.Began).Round(time.Millisecond)))
		}
	}
	// waitLayout waits until the stored layout runs comp on n partitions
	// and each has a job that reported.
	waitLayout := func(comp string, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			rec, _, err := controller.LoadLayout(context.Background(), f.st)
			if err != nil {
				t.Fatal(err)
			}
			_, pending := rec.Targets[comp]
			if rec.Counts[comp] == n && !pending {
				jobs := 0
				for _, ps := range e.Controller().Partitions() {
					if strings.HasPrefix(string(ps.Partition), comp+"/") && ps.Job != "" {
						jobs++
					}
				}
				if jobs == n {
					return
				}
			}
			if time.Now().After(deadline) {
				f.mu.Lock()
				defer f.mu.Unlock()
				t.Fatalf("%s not on %d partitions after 60s: layout %+v\n%s", comp, n, rec, strings.Join(f.logs[max(0, len(f.logs)-40):], "\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	quiescing := func() bool {
		_, cur := e.Controller().Rescales()
		return cur != nil
	}

	// Input keeps arriving: a writer adds 20 rows every 2 ms until the last
	// rescale is done, and a last batch after it.
	stopWriting := make(chan struct{})
	written := make(chan map[string]int)
	go func() {
		want := map[string]int{}
		r := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stopWriting:
				written <- want
				return
			case <-time.After(2 * time.Millisecond):
			}
			rows := make([]weir.Row, 20)
			parts := make([]int, 20)
			for i := range rows {
				k := fmt.Sprintf("k%02d", r.IntN(40))
				rows[i], parts[i] = weir.Row{"key": k}, r.IntN(f.events.Partitions())
				want[k]++
			}
			if err := f.events.Write(context.Background(), rows, parts); err != nil {
				t.Error(err)
			}
		}
	}()
	start()
	steps := []struct {
		comp string
		n    int
		kill string // "", "asked", "quiescing", "switched"
	}{
		{"Counter", 1, ""},
		{"Relay", 7, "asked"},
		{"Counter", 16, "quiescing"},
		{"Relay", 2, "switched"},
		{"Counter", 2, ""},
		{"Relay", 16, "quiescing"},
		{"Counter", 7, "asked"},
		{"Relay", 1, ""},
	}
	for i, s := range steps {
		f.writeKeys(t, 800, 40, uint64(10+i))
		if err := e.Controller().Rescale(context.Background(), s.comp, s.n); err != nil {
			t.Fatal(err)
		}
		switch s.kill {
		case "asked":
			report()
			kill()
			start()
		case "quiescing":
			deadline := time.Now().Add(30 * time.Second)
			for !quiescing() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			report()
			kill()
			start()
		}
		waitLayout(s.comp, s.n)
		if s.kill == "switched" {
			report()
			kill()
			start()
		}
	}
	close(stopWriting)
	for k, n := range <-written {
		f.want[k] += n
	}
	f.writeKeys(t, 800, 40, 99)
	// Everything written is counted once the outputs number the inputs.
	total := 0
	for _, n := range f.want {
		total += n
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := 0
		for _, c := range f.readCounts(t) {
			got += len(c)
		}
		if got >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	report()
	// The last engine's metrics count its rescales and their pauses.
	var metrics strings.Builder
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		metrics.WriteString(mf.GetName() + "\n")
	}
	if done, _ := e.Controller().Rescales(); len(done) > 0 && !strings.Contains(metrics.String(), "weir_rescale_pause_seconds") {
		t.Errorf("%d rescales done, and the metrics lack weir_rescale_pause_seconds:\n%s", len(done), metrics.String())
	}
	kill()
	t.Logf("rescales (pause: no input taken; quiesce: until the outbox was delivered): %s", strings.Join(pauses, "; "))
	f.checkExactlyOnce(t)
}

// TestSwiftPartitionCount: a SwiftMap cannot be rescaled live (its
// receivers' frontiers per sender partition would drop its outputs), so a
// spec that changes a keyed SwiftMap's partition_count is refused while the
// pipeline is not drained, naming the field and the way out.
//
//   - Fed by a Transform source (whose outbox a drain empties), the change
//     is accepted once the pipeline is drained, and every count is exact.
//   - Fed by a Swift source, it is refused even when drained: the source
//     replays what it read since its committed position after any restart
//     (here all of it: the killed run committed no position), and the
//     replays would reach the Counter from Relay partitions whose frontiers
//     never saw them. Before this refusal the drained change was accepted
//     and the Counter counted 261 of those replays twice.
func TestSwiftPartitionCount(t *testing.T) {
	for _, swiftSource := range []bool{false, true} {
		t.Run(map[bool]string{false: "transform-source", true: "swift-source"}[swiftSource], func(t *testing.T) {
			testSwiftPartitionCount(t, swiftSource)
		})
	}
}

func testSwiftPartitionCount(t *testing.T, swiftSource bool) {
	f := newFixture(t, 3)
	f.writeKeys(t, 3000, 30, 5)
	swift := func(parts int) *spec.Pipeline {
		p := rescaleSpec(t)
		if !swiftSource {
			p.Computations["Reader"].ComputationClassName = "Passthrough"
		}
		p.Computations["Relay"].ComputationClassName = "SwiftPassthrough"
		p.Computations["Relay"].PartitionCount = parts
		return p
	}
	newEngine := func(p *spec.Pipeline) (*Engine, error) {
		return New(context.Background(), Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
	}
	e, err := newEngine(swift(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runUntil(t, ctx, e, "some input counted", func(s Status) bool { return s.Computations["Counter"].Inputs > 0 })
	cancel()
	<-done
	_, err = newEngine(swift(2))
	var sce *StaticChangeError
	if !errors.As(err, &sce) || !strings.Contains(err.Error(), "computations.Relay.partition_count: 4 → 2") || !strings.Contains(err.Error(), "target_state = stopped") {
		t.Fatalf("a keyed SwiftMap's new partition_count while working: %v; want a StaticChangeError naming computations.Relay.partition_count", err)
	}
	stop := swift(4)
	stop.Dynamic.TargetState = spec.StateStopped
	if e, err = newEngine(stop); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if state, err := e.Run(rctx); err != nil || state != controller.Stopped {
		t.Fatalf("drain ended in %s: %v", state, err)
	}
	parts := 2
	if swiftSource {
		_, err := newEngine(swift(2))
		if err == nil || !strings.Contains(err.Error(), "the Swift source Reader") || !strings.Contains(err.Error(), "drained or not") {
			t.Fatalf("a drained pipeline's SwiftMap fed by a Swift source changed its partition_count: %v; want a refusal naming the source", err)
		}
		parts = 4
	}
	finite := swift(parts)
	finite.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = true
	f.run(t, finite, nil)
	f.checkExactlyOnce(t)
	rec, _, err := controller.LoadLayout(context.Background(), f.st)
	if err != nil || rec.Counts["Relay"] != parts {
		t.Fatalf("the stored layout %+v (%v); want Relay on %d", rec, err, parts)
	}
}
