package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/transport"
)

// Scenario is everything one seed decides: the workload, the engine's
// configuration and the fault schedule. Draw derives it from the seed, so
// the seed alone replays it; a test may also build one by hand (the
// metamorphic test varies Config over a fixed workload).
type Scenario struct {
	Seed uint64
	Workload
	Config
	// Faults is the swarm's choice: which fault types this seed injects.
	Faults FaultSet
	// Probabilities per passage, and budgets per run, of the continuous
	// faults.
	CrashProb                  float64
	CrashBudget                int
	AmbiguousProb              float64
	AmbiguousBudget            int
	AckLossProb, RedeliverProb float64
	AckBudget, RedeliverBudget int
	// Episodes are the discrete faults, in order, each started when the
	// pipeline's progress (committed Counter inputs / messages) reaches At.
	Episodes []Episode
}

// Workload is the input: Messages rows {"key", "seq", "event_ts"} spread
// round-robin over SourcePartitions partitions, keys drawn from Keys.
type Workload struct {
	Messages         int
	Keys             int
	SourcePartitions int
	// Poison, when positive, marks every Poison-th input row poisoned:
	// Counter fails on it (after counting it, so its call has effects to
	// undo) and its dead_letter_stream takes it to the queue "dead"; the
	// model leaves it out, and the final check wants exactly one dead
	// letter per poisoned row.
	Poison int
}

// Config is the engine configuration: the axes of the metamorphic test.
type Config struct {
	CounterPartitions int
	Workers           int
	BatchRows         int
	// SwiftReader: the source computation is a SwiftMap (SwiftOrderedSource)
	// instead of a Transform (TransformOrderedSource).
	SwiftReader bool
	// ExtraStage inserts a SwiftMap relay between Reader and Counter.
	ExtraStage bool
	// Compact: Counter uses compact_input_messages for dedup.
	Compact bool
	// AsyncSink: counts go to AsyncQueueSink (transactional outbox) instead
	// of SyncQueueSink (written in the epoch).
	AsyncSink bool
	// OutputPartitions of the output queue "counts".
	OutputPartitions int
	LeaseTimeout     time.Duration
	// LostTimeout: lost-job / lost-worker timeout. Longer than LeaseTimeout
	// makes zombies end by lease expiry rather than by abort.
	LostTimeout      time.Duration
	LeaseCheckPeriod time.Duration
	// ClockStep is how far the store's (manual) clock moves per controller
	// cycle; episodes move it further.
	ClockStep time.Duration
	// PaceCycles: the input is released over about this many controller
	// cycles (a producer writing while the pipeline runs).
	PaceCycles int
	// MemTableSize of the Pebble store (small: flushes and compactions
	// happen during the run and are crashed into).
	MemTableSize uint64
	// ExternalState: Counter keeps its counts in the external state table
	// key_counts (builtin.ExternalCounter) instead of weir.State; the
	// checkers read the table.
	ExternalState bool
	// Uint32Bucket: Reader adds a uint32 column "bucket" and Relay and
	// Counter group by (bucket, key): a non-canonical integer first in the
	// key, whose routing must survive outputs re-sent from the outbox.
	Uint32Bucket bool
	// BufferRows bounds every transport buffer to this many messages as
	// well as to its 64 KiB (0: bytes only; transport.Hub.SetRowLimit).
	BufferRows int
	// SourceWake: the store tells where its sequences end
	// (store.SequenceTails), so a queue source skips reads past the end and
	// wakes its job on a write (connector.ReadNotifier), and every job idles
	// for 20 ms instead of 2 ms (sourceWakeBackoff): a wake the engine fails
	// to give shows as a slow run. Off: the store hides it and jobs poll
	// every 2 ms.
	SourceWake bool
}

// FaultSet says which fault types a seed injects.
type FaultSet struct {
	Crash       bool // F1: jobs crash at the named crash points
	Zombie      bool // F2: a job frozen past its lease, replaced, resumed
	WorkerLoss  bool // F2/F8: a worker stops heartbeating; its jobs move
	Ambiguous   bool // F4: epoch commits with an unknown outcome
	AckLoss     bool // transport: acknowledgements lost (message resent)
	Redeliver   bool // transport: messages delivered twice
	StoreError  bool // F3: WAL write/fsync error; the process restarts
	PowerLoss   bool // F1/F3: unsynced data dropped; the process restarts
	ExpireLease bool // zombies end by lease expiry (pings lost), not abort
	PauseStop   bool // the pipeline is paused, stopped (drained) and restarted
	// NewPartition: the last source partition is hidden until an episode
	// reveals it (needs two source partitions or more).
	NewPartition bool
	// Handover: the controller is replaced, as a new leader takes over,
	// by one that adopts the running jobs (controller.Adopt).
	Handover bool
	// Rescale: the Counter's partition count is changed while it runs
	// (controller.Rescale), to 1, 2, 7 or 16.
	Rescale bool
}

func (f FaultSet) String() string {
	var on []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.Crash, "crash"}, {f.Zombie, "zombie"}, {f.WorkerLoss, "worker-loss"}, {f.Ambiguous, "ambiguous"},
		{f.AckLoss, "ack-loss"}, {f.Redeliver, "redeliver"}, {f.StoreError, "store-error"}, {f.PowerLoss, "power-loss"},
		{f.ExpireLease, "expire-lease"}, {f.PauseStop, "pause-stop"}, {f.NewPartition, "new-partition"},
		{f.Handover, "handover"}, {f.Rescale, "rescale"}} {
		if x.on {
			on = append(on, x.name)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// EpisodeKind names a discrete fault.
type EpisodeKind string

// The discrete faults.
const (
	EpZombie     EpisodeKind = "zombie"
	EpWorkerLoss EpisodeKind = "worker-loss"
	EpStoreError EpisodeKind = "store-error"
	EpPowerLoss  EpisodeKind = "power-loss"
	// EpPauseStop pauses the pipeline, then asks it to stop (which must
	// drain first: "stopped" means nothing is in flight), then starts it
	// again — the pipeline state machine's transitions under load.
	EpPauseStop EpisodeKind = "pause-stop"
	// EpNewPartition reveals a source partition that was hidden until now
	// (a topic's partition count grew): its rows carry write times from
	// before the stream's watermark and must still be processed once.
	EpNewPartition EpisodeKind = "new-partition"
	// EpHandover replaces the controller by a new one that adopts the
	// running jobs (sim.handover).
	EpHandover EpisodeKind = "handover"
	// EpRescale asks for the Counter on another partition count
	// (sim.rescale); the controller carries it out while the other faults
	// go on.
	EpRescale EpisodeKind = "rescale"
)

// Episode is one discrete fault.
type Episode struct {
	Kind EpisodeKind
	// At is the progress fraction that starts it.
	At float64
	// Pick chooses the target (partition or worker) among those present;
	// Target, if set, names the zombie's partition instead.
	Pick   uint64
	Target transport.PartitionID
	// Point is where a zombie freezes.
	Point job.CrashPoint
	// Skip (store error) lets this many WAL operations pass first; Sync
	// fails syncs instead of writes.
	Skip int
	Sync bool
	// Unsynced (power loss) is the share, in percent, of unsynced data that
	// survives.
	Unsynced int
}

func (e Episode) String() string {
	switch e.Kind {
	case EpZombie:
		return fmt.Sprintf("%s@%.2f(pick %d, %s)", e.Kind, e.At, e.Pick%100, e.Point)
	case EpStoreError:
		op := "write"
		if e.Sync {
			op = "sync"
		}
		return fmt.Sprintf("%s@%.2f(WAL %s after %d)", e.Kind, e.At, op, e.Skip)
	case EpPowerLoss:
		return fmt.Sprintf("%s@%.2f(unsynced kept %d%%)", e.Kind, e.At, e.Unsynced)
	default:
		return fmt.Sprintf("%s@%.2f", e.Kind, e.At)
	}
}

func (s Scenario) String() string {
	var eps []string
	for _, e := range s.Episodes {
		eps = append(eps, e.String())
	}
	return fmt.Sprintf("seed %d: workload %+v; config %+v; faults [%s] crash p=%.3f/%d ambiguous p=%.3f/%d ack-loss p=%.3f/%d redeliver p=%.3f/%d; episodes [%s]",
		s.Seed, s.Workload, s.Config, s.Faults, s.CrashProb, s.CrashBudget, s.AmbiguousProb, s.AmbiguousBudget,
		s.AckLossProb, s.AckBudget, s.RedeliverProb, s.RedeliverBudget, strings.Join(eps, " "))
}

// DefaultConfig is a middle-of-the-road configuration.
func DefaultConfig() Config {
	return Config{
		CounterPartitions: 3, Workers: 2, BatchRows: 50, OutputPartitions: 2,
		LeaseTimeout: 5 * time.Second, LostTimeout: 2500 * time.Millisecond,
		LeaseCheckPeriod: 2 * time.Second, ClockStep: 5 * time.Millisecond, MemTableSize: 4 << 20, PaceCycles: 200,
	}
}

// Draw derives seed's scenario; messages is the workload size (0: drawn,
// small). Swarm testing: each fault type is switched on with probability
// one half, so seeds differ in which faults meet, and a fault that masks
// another (a crash ending an episode early) is absent in many seeds.
func Draw(seed uint64, messages int) Scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	if messages <= 0 {
		messages = 800 + r.IntN(2200)
	}
	sc := Scenario{Seed: seed}
	sc.Workload = Workload{Messages: messages, Keys: 1 + r.IntN(60), SourcePartitions: 1 + r.IntN(4)}
	c := DefaultConfig()
	c.CounterPartitions = 1 + r.IntN(5)
	c.Workers = 1 + r.IntN(3)
	c.BatchRows = []int{1, 7, 20, 50, 100, 250}[r.IntN(6)]
	if messages > 5000 {
		// One row per epoch is a fine edge case but slow on big inputs
		// (every row is a synced commit or two).
		c.BatchRows = max(c.BatchRows, 7)
	}
	c.SwiftReader = r.IntN(2) == 0
	c.ExtraStage = r.IntN(3) == 0
	c.Compact = r.IntN(2) == 0
	c.AsyncSink = r.IntN(2) == 0
	c.OutputPartitions = 1 + r.IntN(3)
	c.LeaseTimeout = time.Duration(2+r.IntN(6)) * time.Second
	c.LeaseCheckPeriod = []time.Duration{200 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second}[r.IntN(4)]
	c.ClockStep = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}[r.IntN(4)]
	c.MemTableSize = []uint64{256 << 10, 4 << 20, 64 << 20}[r.IntN(3)]
	c.PaceCycles = 100 + r.IntN(300)
	f := FaultSet{
		Crash: r.IntN(2) == 0, Zombie: r.IntN(2) == 0, WorkerLoss: r.IntN(3) == 0, Ambiguous: r.IntN(2) == 0,
		AckLoss: r.IntN(2) == 0, Redeliver: r.IntN(2) == 0, StoreError: r.IntN(2) == 0, PowerLoss: r.IntN(2) == 0,
		ExpireLease: r.IntN(2) == 0, PauseStop: r.IntN(3) == 0,
		NewPartition: r.IntN(3) == 0 && sc.Workload.SourcePartitions > 1,
	}
	if f.ExpireLease {
		c.LostTimeout = 3 * c.LeaseTimeout
	} else {
		c.LostTimeout = c.LeaseTimeout / 2
	}
	if f.StoreError {
		// No memtable rotation while a WAL fault is armed (Pebble panics on
		// a failed WAL rotation, which would end this process).
		c.MemTableSize = 64 << 20
	}
	sc.Config = c
	sc.Faults = f
	// Fault density scales with the workload, so that long runs inject
	// proportionally more.
	scale := max(1, messages/2000)
	sc.CrashProb, sc.CrashBudget = 0.01+r.Float64()*0.05, (5+r.IntN(20))*scale
	sc.AmbiguousProb, sc.AmbiguousBudget = 0.02+r.Float64()*0.1, (5+r.IntN(20))*scale
	sc.AckLossProb, sc.AckBudget = 0.001+r.Float64()*0.02, (10+r.IntN(50))*scale
	sc.RedeliverProb, sc.RedeliverBudget = 0.001+r.Float64()*0.02, (10+r.IntN(50))*scale
	episodes := func(on bool, kind EpisodeKind, max int) {
		if !on {
			return
		}
		n := 1 + r.IntN(max)
		for i := 0; i < n; i++ {
			e := Episode{Kind: kind, At: 0.05 + 0.85*r.Float64(), Pick: r.Uint64()}
			switch kind {
			case EpZombie:
				// Mostly before the commit: the zombie's commit is what the
				// lease must fence. After-commit points exercise a zombie's
				// sends and acknowledgements (fenced by the transport's
				// sender registration).
				e.Point = []job.CrashPoint{job.CrashBeforeCommit, job.CrashBeforeCommit,
					job.CrashAfterCommitBeforeAck, job.CrashAfterAckBeforeErase}[r.IntN(4)]
			case EpStoreError:
				e.Skip, e.Sync = r.IntN(60), r.IntN(2) == 0
			case EpPowerLoss:
				e.Unsynced = []int{0, 0, 10, 50, 90, 100}[r.IntN(6)]
			}
			sc.Episodes = append(sc.Episodes, e)
		}
	}
	longer := max(1, min(4, messages/10000))
	episodes(f.Zombie, EpZombie, 2*longer)
	episodes(f.WorkerLoss, EpWorkerLoss, longer)
	episodes(f.StoreError, EpStoreError, 2*longer)
	episodes(f.PowerLoss, EpPowerLoss, 2*longer)
	episodes(f.PauseStop, EpPauseStop, longer)
	if f.NewPartition {
		// Progress counts every partition's rows, so the reveal must come
		// before the visible partitions alone could reach it.
		n := float64(sc.Workload.SourcePartitions)
		sc.Episodes = append(sc.Episodes, Episode{Kind: EpNewPartition, At: (0.05 + 0.8*r.Float64()) * (n - 1) / n})
	}
	sortEpisodes(sc.Episodes)
	// Drawn last, so that the other draws of every seed stay as they were.
	sc.Config.ExternalState = r.IntN(3) == 0
	sc.Config.Uint32Bucket = r.IntN(3) == 0
	if r.IntN(3) == 0 {
		sc.Workload.Poison = 17 + r.IntN(40)
	}
	// Buffers bounded by rows too: none (64 KiB alone), the engine's
	// default of transport.RowLimit batches, or one message, so that a
	// full buffer blocks its senders' input at every epoch.
	sc.Config.BufferRows = []int{0, transport.RowLimit(sc.Config.BatchRows), 1}[r.IntN(3)]
	sc.Config.SourceWake = r.IntN(2) == 0
	// Drawn after the others, so that adding it left every other draw of a
	// seed as it was.
	sc.Faults.Handover = r.IntN(3) == 0
	episodes(sc.Faults.Handover, EpHandover, 2*longer)
	// Drawn after the handover, for the same reason.
	sc.Faults.Rescale = r.IntN(3) == 0
	episodes(sc.Faults.Rescale, EpRescale, 2*longer)
	sortEpisodes(sc.Episodes)
	// The first zombie freezes before its commit, so that every seed with
	// zombies has a zombie commit for the fence to reject.
	for i := range sc.Episodes {
		if sc.Episodes[i].Kind == EpZombie {
			sc.Episodes[i].Point = job.CrashBeforeCommit
			break
		}
	}
	return sc
}

func sortEpisodes(es []Episode) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].At < es[j-1].At; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}
