package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
)

// TestScripts runs the engine-level protocol scripts in testdata/ (see
// internal/sim for the job and controller ones):
//
//	new rows=N                       a store with the counter example's queues and N events
//	run [partitions=N] [until=counted|rescaled|stopped] [batch=N] [mode=M]
//	                                 build an engine from the counter example (an
//	                                 unbounded source) and run it until some input is
//	                                 counted or a rescale is done (then kill it) or,
//	                                 with target stopped, until drained; a refused spec prints the refusal;
//	                                 then the stored layout record (counts, targets)
//
// Regenerate the golden output with -rewrite.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var f *fixture
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "new":
				f = newFixture(t, 3)
				var rows int
				d.ScanArgs(t, "rows", &rows)
				f.writeKeys(t, rows, 30, 9)
				return "ok\n"
			case "run":
				p := example(t, "counter")
				p.Computations["Reader"].SourceStreams["events"].Parameters["finite"] = false
				p.Computations["Reader"].MaxRowsPerBatch = 20
				until := "counted"
				for _, a := range d.CmdArgs {
					switch a.Key {
					case "partitions":
						n, _ := strconv.Atoi(a.Vals[0])
						p.Computations["Counter"].PartitionCount = n
					case "batch":
						n, _ := strconv.Atoi(a.Vals[0])
						p.Computations["Counter"].MaxRowsPerBatch = n
					case "until":
						until = a.Vals[0]
					case "mode":
						p.Computations["Counter"].ProcessingMode = spec.ProcessingMode(a.Vals[0])
					}
				}
				if until == "stopped" {
					p.Dynamic.TargetState = spec.StateStopped
				}
				e, err := New(context.Background(), Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
				var sce *StaticChangeError
				if errors.As(err, &sce) {
					return fmt.Sprintf("refused (pipeline %s):\n%v\n", sce.State, err)
				}
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if until == "stopped" {
					state, err := e.Run(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return fmt.Sprintf("accepted; drained: pipeline %s\n%s%s", state, rescales(e), storedLayout(t, f))
				}
				runCtx, kill := context.WithCancel(ctx)
				cond := func(s Status) bool { return s.Computations["Counter"].Inputs > 0 }
				if until == "rescaled" {
					cond = func(Status) bool { done, _ := e.Controller().Rescales(); return len(done) > 0 }
				}
				done := runUntil(t, runCtx, e, until, cond)
				kill()
				state := <-done
				if state != controller.Working {
					t.Fatalf("ended in %s", state)
				}
				return "accepted; killed while working (input in flight)\n" + rescales(e) + storedLayout(t, f)
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// rescales prints the rescales e's controller finished.
func rescales(e *Engine) string {
	done, _ := e.Controller().Rescales()
	out := ""
	for _, r := range done {
		out += fmt.Sprintf("rescaled %s from %d to %d partitions\n", r.Computation, r.From, r.To)
	}
	return out
}

// storedLayout prints the layout record: the counts jobs run under and the
// rescales asked for.
func storedLayout(t *testing.T, f *fixture) string {
	rec, ok, err := controller.LoadLayout(context.Background(), f.st)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "layout: none stored\n"
	}
	out := fmt.Sprintf("layout: %s", rec.Counts)
	if len(rec.Targets) > 0 {
		out += fmt.Sprintf("; rescaling to %s", rec.Targets)
	}
	return out + "\n"
}
