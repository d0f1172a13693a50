package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/transport"
)

// Stats counts what a run injected and what its checkers saw. Results of
// many seeds add up with Add.
type Stats struct {
	// Faults injected.
	Crashes          map[job.CrashPoint]int
	ZombieEpisodes   int // a job frozen until its partition was re-leased, then resumed
	ZombiesExpired   int // … of which ended by lease expiry (pings lost) rather than abort
	ZombiesNotFired  int // armed, but the target passed no crash point in time
	WorkerLosses     int
	AmbiguousApplied int
	AmbiguousLost    int
	// AmbiguousLate: attempts answered "outcome unknown" and held back, to
	// land later after other commits (a networked store's delayed commit);
	// LateApplied / LateRejected: how their landings went (a late attempt
	// may apply only if no other attempt of its epoch did).
	AmbiguousLate, LateApplied, LateRejected int
	AcksLost                                 int
	Redeliveries                             int
	StoreErrors                              int // WAL write/fsync errors that broke the store (process restarts)
	StoreErrNotFired                         int
	PowerLosses                              int
	PauseStops                               int // pause → stop (drained) → start episodes completed
	NewPartitions                            int // source partitions revealed while running
	Handovers                                int // the controller replaced by one that adopts the running jobs
	Adopted                                  int // … jobs it adopted (the others restarted)
	Rescales                                 int // the Counter's partition count changed while it ran (asked)
	Rescaled                                 int // … the new layout committed before the run ended
	DeadLetters                              int // poisoned rows dead-lettered (Workload.Poison), checked exactly once each
	PebblePanics                             int // Pebble panicked on a failed WAL: a process crash
	Restarts                                 int // process restarts (store errors + power losses)

	// C5: zombie writes.
	ZombieAttempts, ZombieAccepted, ZombieRejected int

	// Observer (C3, C4).
	Polls        int // confirmed snapshots checked
	Discarded    int // snapshots not confirmed durable (store broke or power lost)
	Observations int // distinct output rows seen in confirmed snapshots
	// Exposures: rows seen in an unconfirmed snapshot that did not survive:
	// the store's documented read-before-durable window (informational).
	Exposures int

	// Recovery times (wall clock): from a job crash to its partition's next
	// epoch commit; from a process-level failure to the first epoch commit
	// after the restart.
	JobRecovery     []time.Duration
	RestartRecovery []time.Duration
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	if s.Crashes == nil {
		s.Crashes = map[job.CrashPoint]int{}
	}
	for k, v := range o.Crashes {
		s.Crashes[k] += v
	}
	s.ZombieEpisodes += o.ZombieEpisodes
	s.ZombiesExpired += o.ZombiesExpired
	s.ZombiesNotFired += o.ZombiesNotFired
	s.WorkerLosses += o.WorkerLosses
	s.AmbiguousApplied += o.AmbiguousApplied
	s.AmbiguousLost += o.AmbiguousLost
	s.AmbiguousLate += o.AmbiguousLate
	s.LateApplied += o.LateApplied
	s.LateRejected += o.LateRejected
	s.AcksLost += o.AcksLost
	s.Redeliveries += o.Redeliveries
	s.StoreErrors += o.StoreErrors
	s.StoreErrNotFired += o.StoreErrNotFired
	s.PowerLosses += o.PowerLosses
	s.PauseStops += o.PauseStops
	s.NewPartitions += o.NewPartitions
	s.Handovers += o.Handovers
	s.Adopted += o.Adopted
	s.Rescales += o.Rescales
	s.Rescaled += o.Rescaled
	s.DeadLetters += o.DeadLetters
	s.PebblePanics += o.PebblePanics
	s.Restarts += o.Restarts
	s.ZombieAttempts += o.ZombieAttempts
	s.ZombieAccepted += o.ZombieAccepted
	s.ZombieRejected += o.ZombieRejected
	s.Polls += o.Polls
	s.Discarded += o.Discarded
	s.Observations += o.Observations
	s.Exposures += o.Exposures
	s.JobRecovery = append(s.JobRecovery, o.JobRecovery...)
	s.RestartRecovery = append(s.RestartRecovery, o.RestartRecovery...)
}

// CrashTotal is the number of injected job crashes.
func (s Stats) CrashTotal() int {
	n := 0
	for _, v := range s.Crashes {
		n += v
	}
	return n
}

// FaultTotal is the number of injected faults of every type.
func (s Stats) FaultTotal() int {
	return s.CrashTotal() + s.ZombieEpisodes + s.WorkerLosses + s.AmbiguousApplied + s.AmbiguousLost + s.AmbiguousLate +
		s.AcksLost + s.Redeliveries + s.StoreErrors + s.PowerLosses + s.PauseStops + s.NewPartitions + s.Handovers + s.Rescales
}

// statsBox is a Stats shared by a run's goroutines.
type statsBox struct {
	mu sync.Mutex
	s  Stats
}

func (b *statsBox) add(f func(*Stats)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.s)
}

func (b *statsBox) crash(p job.CrashPoint) {
	b.add(func(s *Stats) {
		if s.Crashes == nil {
			s.Crashes = map[job.CrashPoint]int{}
		}
		s.Crashes[p]++
	})
}

func (b *statsBox) snapshot() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.s
	s.Crashes = map[job.CrashPoint]int{}
	for k, v := range b.s.Crashes {
		s.Crashes[k] = v
	}
	s.JobRecovery = append([]time.Duration(nil), b.s.JobRecovery...)
	s.RestartRecovery = append([]time.Duration(nil), b.s.RestartRecovery...)
	return s
}

// recoveryClock measures recovery times: it remembers when a partition's
// job crashed, or when the process failed, and stops the clock at the next
// epoch commit (a lease-fenced commit that writes more than its
// partition_transactions row: not a job's first, lease-proving commit, nor
// an idle lease probe).
type recoveryClock struct {
	stats *statsBox

	mu        sync.Mutex
	crashedAt map[transport.PartitionID]time.Time
	restartAt time.Time
}

func (r *recoveryClock) crashed(p transport.PartitionID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crashedAt == nil {
		r.crashedAt = map[transport.PartitionID]time.Time{}
	}
	if _, ok := r.crashedAt[p]; !ok {
		r.crashedAt[p] = time.Now()
	}
}

// restarting starts the process-recovery clock at t and forgets pending job
// crashes (the process restart supersedes them).
func (r *recoveryClock) restarting(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restartAt.IsZero() || t.Before(r.restartAt) {
		r.restartAt = t
	}
	r.crashedAt = nil
}

func (r *recoveryClock) committed(p transport.PartitionID) {
	r.mu.Lock()
	var job, proc time.Duration
	now := time.Now()
	if t, ok := r.crashedAt[p]; ok {
		job = now.Sub(t)
		delete(r.crashedAt, p)
	}
	if !r.restartAt.IsZero() {
		proc = now.Sub(r.restartAt)
		r.restartAt = time.Time{}
	}
	r.mu.Unlock()
	if job > 0 || proc > 0 {
		r.stats.add(func(s *Stats) {
			if job > 0 {
				s.JobRecovery = append(s.JobRecovery, job)
			}
			if proc > 0 {
				s.RestartRecovery = append(s.RestartRecovery, proc)
			}
		})
	}
}

// Percentile returns the q-quantile (0..1) of ds, by nearest rank; 0 if
// empty.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// String is a compact account of the injected faults and observations.
func (s Stats) String() string {
	return fmt.Sprintf("crashes %v; zombies %d (expired %d, not reached %d); worker losses %d; ambiguous %d applied, %d lost, %d late (%d landed, %d rejected); acks lost %d; redeliveries %d; store errors %d (not reached %d); power losses %d; Pebble panics %d; restarts %d; zombie writes %d attempted, %d accepted, %d rejected; snapshots %d checked, %d discarded; rows observed %d; exposures %d; recoveries %d job, %d process",
		s.Crashes, s.ZombieEpisodes, s.ZombiesExpired, s.ZombiesNotFired, s.WorkerLosses, s.AmbiguousApplied, s.AmbiguousLost,
		s.AmbiguousLate, s.LateApplied, s.LateRejected, s.AcksLost, s.Redeliveries, s.StoreErrors, s.StoreErrNotFired, s.PowerLosses, s.PebblePanics, s.Restarts,
		s.ZombieAttempts, s.ZombieAccepted, s.ZombieRejected, s.Polls, s.Discarded, s.Observations, s.Exposures,
		len(s.JobRecovery), len(s.RestartRecovery))
}
