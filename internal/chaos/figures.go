package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir/job"
)

// Summary is a one-line account of a seed's run.
func (r *Result) Summary() string {
	s := r.Stats
	return fmt.Sprintf("seed %d: %d msgs → %d outputs in %.1fs [%s, sink %s]; faults %d (crash %d, zombie %d, worker-loss %d, ambiguous %d, ack-lost %d, redelivered %d, store-error %d, power-loss %d, handover %d adopting %d jobs, rescale %d/%d); lost %d dup %d unexpected %d; C3 %d C4 %d; zombie writes %d/%d",
		r.Scenario.Seed, r.Scenario.Messages, r.Outputs, r.Elapsed.Seconds(), r.Scenario.Faults, sinkName(r.Scenario.AsyncSink),
		s.FaultTotal(), s.CrashTotal(), s.ZombieEpisodes, s.WorkerLosses, s.AmbiguousApplied+s.AmbiguousLost+s.AmbiguousLate,
		s.AcksLost, s.Redeliveries, s.StoreErrors, s.PowerLosses, s.Handovers, s.Adopted, s.Rescaled, s.Rescales, r.Lost, r.Duplicated, r.Unexpected, r.C3, r.C4,
		s.ZombieAttempts, s.ZombieAccepted)
}

func sinkName(async bool) string {
	if async {
		return "AsyncQueueSink"
	}
	return "SyncQueueSink"
}

// SinkFigures are the C1 figures of one sink kind.
type SinkFigures struct {
	Seeds, Inputs, Outputs       int
	Lost, Duplicated, Unexpected int
}

// Figures aggregate the results of many seeds (testing plan §2.5).
type Figures struct {
	Seeds                        int
	Failed                       []string // "seed N: first violation — replay command"
	Wall                         time.Duration
	Stats                        Stats
	Sinks                        map[string]*SinkFigures
	Inputs                       int
	Outputs                      int
	Lost, Duplicated, Unexpected int
	StateMismatches              int
	C3, C4                       int
}

// Add adds one seed's result.
func (f *Figures) Add(r *Result, replay string) {
	f.Seeds++
	f.Wall += r.Elapsed
	f.Stats.Add(r.Stats)
	if f.Sinks == nil {
		f.Sinks = map[string]*SinkFigures{}
	}
	name := sinkName(r.Scenario.AsyncSink)
	sf := f.Sinks[name]
	if sf == nil {
		sf = &SinkFigures{}
		f.Sinks[name] = sf
	}
	sf.Seeds++
	sf.Inputs += r.Scenario.Messages
	sf.Outputs += r.Outputs
	sf.Lost += r.Lost
	sf.Duplicated += r.Duplicated
	sf.Unexpected += r.Unexpected
	f.Inputs += r.Scenario.Messages
	f.Outputs += r.Outputs
	f.Lost += r.Lost
	f.Duplicated += r.Duplicated
	f.Unexpected += r.Unexpected
	f.StateMismatches += r.StateMismatches
	f.C3 += r.C3
	f.C4 += r.C4
	if r.Failed() {
		f.Failed = append(f.Failed, fmt.Sprintf("seed %d: %s — replay: `%s`", r.Scenario.Seed, r.Violations[0], replay))
	}
}

// Summary is a one-line account of the aggregate.
func (f *Figures) Summary() string {
	s := f.Stats
	return fmt.Sprintf("%d seeds (%d failed), %d msgs → %d outputs, %d faults; lost %d dup %d unexpected %d; state≠model %d; C3 %d C4 %d; zombie writes %d/%d; recovery job p50 %v p99 %v, process p50 %v p99 %v",
		f.Seeds, len(f.Failed), f.Inputs, f.Outputs, s.FaultTotal(), f.Lost, f.Duplicated, f.Unexpected, f.StateMismatches,
		f.C3, f.C4, s.ZombieAttempts, s.ZombieAccepted,
		ms(Percentile(s.JobRecovery, .5)), ms(Percentile(s.JobRecovery, .99)),
		ms(Percentile(s.RestartRecovery, .5)), ms(Percentile(s.RestartRecovery, .99)))
}

func ms(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// Markdown writes the figures table of docs/reliability.md. header names
// the build and the command that produced it.
func (f *Figures) Markdown(w io.Writer, build, command string, wall time.Duration, proc *ProcessFigures) {
	s := f.Stats
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "| %s | %s |\n", name, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "| Figure | Value |\n|---|---|\n")
	row("Build", "%s", build)
	row("Command", "`%s`", command)
	row("Seeds run (L1 simulation)", "%d (failed: %d); wall clock %s (sum of seeds %s)", f.Seeds, len(f.Failed), wall.Round(time.Second), f.Wall.Round(time.Second))
	row("Input records / committed outputs", "%d in / %d out", f.Inputs, f.Outputs)
	var points []string
	for _, p := range []job.CrashPoint{job.CrashBeforeCommit, job.CrashAfterCommitBeforeAck, job.CrashAfterAckBeforeErase} {
		points = append(points, fmt.Sprintf("%s %d", p, s.Crashes[p]))
	}
	row("Faults injected, total", "%d", s.FaultTotal())
	row("F1 job crashes (kill at a named point)", "%d (%s)", s.CrashTotal(), strings.Join(points, ", "))
	row("F2 zombie episodes (frozen past the lease, replaced, resumed)", "%d (%d ended by lease expiry, %d by abort; %d armed but not reached)",
		s.ZombieEpisodes, s.ZombiesExpired, s.ZombieEpisodes-s.ZombiesExpired, s.ZombiesNotFired)
	row("F2/F8 lost workers (heartbeats stop, jobs move)", "%d", s.WorkerLosses)
	row("F3 WAL write/fsync errors (store broken → process restart)", "%d (%d armed but not reached)", s.StoreErrors, s.StoreErrNotFired)
	row("F1/F3 power losses (unsynced data dropped → restart)", "%d", s.PowerLosses)
	row("F8 pause → stop (drained: empty outboxes checked) → start", "%d", s.PauseStops)
	row("F8 source partitions appearing mid-run (rows older than the watermark)", "%d", s.NewPartitions)
	row("F8 controller handovers (a new controller adopts the running jobs)", "%d (%d jobs adopted)", s.Handovers, s.Adopted)
	row("F8 rescales of the Counter while it runs (to 1, 2, 7 or 16 partitions)", "%d asked (%d committed before the run ended)", s.Rescales, s.Rescaled)
	row("Poisoned rows dead-lettered (failed call undone, one dead letter each)", "%d", s.DeadLetters)
	row("F4 ambiguous commits", "%d (%d applied, %d not applied, %d landing late: %d applied before any retry, %d rejected by the guard; all resolved by the partition_transactions row)",
		s.AmbiguousApplied+s.AmbiguousLost+s.AmbiguousLate, s.AmbiguousApplied, s.AmbiguousLost, s.AmbiguousLate, s.LateApplied, s.LateRejected)
	row("Transport: lost acks / redeliveries", "%d / %d", s.AcksLost, s.Redeliveries)
	row("Process restarts (simulated)", "%d", s.Restarts)
	names := make([]string, 0, len(f.Sinks))
	for n := range f.Sinks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sf := f.Sinks[n]
		row("C1 lost / duplicated / unexpected, "+n, "**%d / %d / %d** (%d seeds, %d in, %d out)", sf.Lost, sf.Duplicated, sf.Unexpected, sf.Seeds, sf.Inputs, sf.Outputs)
	}
	row("C2 keys whose state ≠ reference model", "**%d**", f.StateMismatches)
	row("C3 outputs seen committed that later vanished or changed", "**%d** (%d rows observed in %d confirmed snapshots; %d snapshots discarded as not yet durable)", f.C3, s.Observations, s.Polls, s.Discarded)
	row("C3 (informational) rows visible before durable, lost by a power loss", "%d", s.Exposures)
	row("C4 offset-ahead-of-state (or state-ahead-of-offset) violations", "**%d** (checked in every confirmed snapshot and at every restart)", f.C4)
	row("C5 zombie writes attempted / accepted", "**%d / %d** (%d rejected by the lease fence)", s.ZombieAttempts, s.ZombieAccepted, s.ZombieRejected)
	row("Recovery, job crash → its partition's next epoch commit", "p50 %s, p99 %s, max %s (%d crashes)",
		ms(Percentile(s.JobRecovery, .5)), ms(Percentile(s.JobRecovery, .99)), ms(Percentile(s.JobRecovery, 1)), len(s.JobRecovery))
	row("Recovery, process failure → first epoch commit after restart", "p50 %s, p99 %s, max %s (%d restarts)",
		ms(Percentile(s.RestartRecovery, .5)), ms(Percentile(s.RestartRecovery, .99)), ms(Percentile(s.RestartRecovery, 1)), len(s.RestartRecovery))
	if proc != nil {
		proc.markdownRows(row)
	}
	if len(f.Failed) == 0 {
		row("Failing seeds", "none")
	} else {
		row("Failing seeds", "%s", strings.Join(f.Failed, "<br>"))
	}
}
