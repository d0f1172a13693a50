// Package chaos is weir's fault-injection harness: a seeded simulation of
// the whole engine in one process, a metamorphic comparison of
// configurations, process-level chaos on the real binary, and the checkers
// and figures of docs/reliability.md (testing plan layers L1–L3, checkers
// C1–C5 and C7).
//
// How to use this package: Draw a Scenario from a seed and Run it; the
// Result says what was injected and what every checker found, and Report
// formats a failure with its replay command. Figures aggregates many
// results into the Markdown table that `weir chaos` writes. RunProcess
// drives the real binary.
//
// The simulation (sim.go). One Run is a sequence of lives — incarnations of
// the engine process — over one in-memory crashable filesystem
// (vfs.NewCrashableMem) and one manual store clock. A life is a Pebble store
// behind a fault-injecting wrapper, the controller, workers, a Hub with
// delivery faults and the pipeline
//
//	paced source → Reader (Transform or Swift) → [Relay (Swift)] → Counter → sink → queue "counts"
//
// with a SyncQueueSink or an AsyncQueueSink. The driver cycles the
// controller, releases input rows, moves the clock and plays the discrete
// fault episodes; a process-level failure (WAL error, power loss, a Pebble
// panic) ends the life, and the next one reopens the store — on the same
// files, or on the crash clone — as a restarted process would.
//
// Faults (faults.go): crashes at the runtime's named crash points and the
// zombie freezer (job.Hooks); ambiguous commits, lost lease pings and
// the zombie-write audit (a store wrapper); lost acknowledgements and
// redeliveries (transport.Faults); WAL write/fsync errors (a filesystem
// wrapper); power losses (MemFS.CrashClone); lost workers. Every coin is a
// pure function of the seed, the fault kind, the place and the place's
// passage count (decide).
//
// Checkers: observer.go (C3 and C4 during the run, on snapshots confirmed
// durable), sim.go restCheck (C3 and C4 after every restart) and
// finalCheck (C1, C2, C3, C5 on the final store after one more power
// loss), the driver's deadline (C7). checkers_test.go proves each checker
// can fail.
//
// Reproducibility: a seed fixes the workload, the configuration and the
// fault schedule; goroutine interleaving stays the Go scheduler's, so a
// replay reproduces the scenario and usually, not always, a failure.
// Deterministic reproductions of the bugs found are in zombieack_test.go
// and storefail_test.go.
package chaos
