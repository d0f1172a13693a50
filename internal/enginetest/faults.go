package enginetest

import (
	"math/rand/v2"
	"sync"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/transport"
)

// Crashes is a job.Hooks that crashes jobs at named points, at random
// with a seeded generator, up to a budget. It counts what it injected.
type Crashes struct {
	mu     sync.Mutex
	rnd    *rand.Rand
	prob   float64
	budget int
	points map[job.CrashPoint]bool
	// Injected counts crashes per point.
	Injected map[job.CrashPoint]int
}

// NewCrashes crashes at any of points (all named points if none) with
// probability prob per passage, at most budget times.
func NewCrashes(seed uint64, prob float64, budget int, points ...job.CrashPoint) *Crashes {
	if len(points) == 0 {
		points = AllCrashPoints
	}
	c := &Crashes{rnd: rand.New(rand.NewPCG(seed, 3)), prob: prob, budget: budget,
		points: map[job.CrashPoint]bool{}, Injected: map[job.CrashPoint]int{}}
	for _, p := range points {
		c.points[p] = true
	}
	return c
}

// AllCrashPoints lists the epoch's named crash points.
var AllCrashPoints = []job.CrashPoint{
	job.CrashBeforeCommit, job.CrashAfterCommitBeforeAck, job.CrashAfterAckBeforeErase,
}

// Crash implements job.Hooks.
func (c *Crashes) Crash(_ transport.PartitionID, p job.CrashPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.points[p] || c.budget <= 0 || c.rnd.Float64() >= c.prob {
		return nil
	}
	c.budget--
	c.Injected[p]++
	return job.ErrCrashed
}

// Total returns the number of injected crashes.
func (c *Crashes) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.Injected {
		n += v
	}
	return n
}

// Freezer stops one partition's job at a crash point, once, until Release:
// the job is alive but silent, like a process stopped by SIGSTOP or a
// goroutine stuck on I/O. Other passages go to Inner.
type Freezer struct {
	Partition transport.PartitionID
	Point     job.CrashPoint
	Inner     job.Hooks

	once    sync.Once
	frozen  chan struct{}
	release chan struct{}
}

// NewFreezer returns a freezer for partition p at point.
func NewFreezer(p transport.PartitionID, point job.CrashPoint) *Freezer {
	return &Freezer{Partition: p, Point: point, frozen: make(chan struct{}), release: make(chan struct{})}
}

// Crash implements job.Hooks.
func (f *Freezer) Crash(p transport.PartitionID, point job.CrashPoint) error {
	if p == f.Partition && point == f.Point {
		hit := false
		f.once.Do(func() { hit = true })
		if hit {
			close(f.frozen)
			<-f.release
			return nil
		}
	}
	if f.Inner != nil {
		return f.Inner.Crash(p, point)
	}
	return nil
}

// Frozen is closed once the job is frozen.
func (f *Freezer) Frozen() <-chan struct{} { return f.frozen }

// Release lets the frozen job continue.
func (f *Freezer) Release() { close(f.release) }
