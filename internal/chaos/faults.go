package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-stream/weir/internal/faultinject"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
)

// decide is the seeded coin of every probabilistic fault: it is a pure
// function of the seed, the fault kind, the place (a partition) and the
// place's own passage count, so a decision does not depend on which other
// goroutine asked first. (The passage counts still depend on scheduling:
// a replay reproduces the fault schedule and the workload, and usually,
// not always, the interleaving.)
func decide(seed uint64, kind, place string, n uint64, p float64) bool {
	if p <= 0 {
		return false
	}
	h := fnv.New64a()
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(seed >> (8 * i))
		b[8+i] = byte(n >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(place))
	// Finalize (splitmix64) so that nearby inputs give unrelated outputs.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < p
}

// budget is a thread-safe counter of faults still allowed.
type budget struct{ left atomic.Int64 }

func (b *budget) take() bool {
	for {
		n := b.left.Load()
		if n <= 0 {
			return false
		}
		if b.left.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// passages counts, per place, how often a fault was considered there.
type passages struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (p *passages) next(place string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]uint64{}
	}
	p.n[place]++
	return p.n[place]
}

// hooks is one life's job.Hooks: crashes at named points (F1) and the
// zombie freezer (F2). A life's hooks die with it: after kill, every job of
// the life that passes a point stops there, uncounted.
type hooks struct {
	sim  *sim
	dead atomic.Bool

	mu sync.Mutex
	// armed: the next passage of (partition, point) freezes.
	armedPart  transport.PartitionID
	armedPoint job.CrashPoint
	frozen     chan struct{} // closed when a job froze
	release    chan struct{} // closed to let it go
}

func (h *hooks) Crash(p transport.PartitionID, point job.CrashPoint) error {
	if h.dead.Load() {
		return job.ErrCrashed
	}
	h.mu.Lock()
	if h.release != nil && h.armedPart == p && h.armedPoint == point {
		frozen, release := h.frozen, h.release
		h.armedPart = "" // one job per episode
		h.mu.Unlock()
		close(frozen)
		<-release
		if h.dead.Load() {
			return job.ErrCrashed
		}
		return nil
	}
	h.mu.Unlock()
	s := h.sim
	if !s.sc.Faults.Crash {
		return nil
	}
	place := string(p) + "|" + string(point)
	if !decide(s.sc.Seed, "crash", place, s.passages.next("crash|"+place), s.sc.CrashProb) || !s.crashBudget.take() {
		return nil
	}
	s.stats.crash(point)
	s.recovery.crashed(p)
	return job.ErrCrashed
}

// arm makes the next passage of (p, point) freeze; it returns the channel
// closed when that happens.
func (h *hooks) arm(p transport.PartitionID, point job.CrashPoint) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armedPart, h.armedPoint = p, point
	h.frozen, h.release = make(chan struct{}), make(chan struct{})
	return h.frozen
}

// unfreeze disarms the freezer and releases a frozen job, if any.
func (h *hooks) unfreeze() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armedPart = ""
	if h.release != nil {
		close(h.release)
		h.release = nil
	}
}

// hubFaults implements transport.Faults for one life with the seed's
// probabilities and the run's shared budget.
type hubFaults struct{ sim *sim }

func (f hubFaults) LoseAck(p transport.PartitionID, _ msgid.ID) bool {
	s := f.sim
	if !s.sc.Faults.AckLoss || !decide(s.sc.Seed, "ack", string(p), s.passages.next("ack|"+string(p)), s.sc.AckLossProb) || !s.ackBudget.take() {
		return false
	}
	s.stats.add(func(st *Stats) { st.AcksLost++ })
	return true
}

func (f hubFaults) Redeliver(p transport.PartitionID, _ msgid.ID) bool {
	s := f.sim
	if !s.sc.Faults.Redeliver || !decide(s.sc.Seed, "redeliver", string(p), s.passages.next("redeliver|"+string(p)), s.sc.RedeliverProb) || !s.redeliverBudget.take() {
		return false
	}
	s.stats.add(func(st *Stats) { st.Redeliveries++ })
	return true
}

// faultStore wraps one life's store. It injects ambiguous commits (F4 for
// the store: the commit applied, or not, and the job is told the outcome is
// unknown) and lost lease pings (so a zombie's lease expires); it audits
// zombie writes (C5): commits naming a lease that was aborted or seen
// expired. A zombie's commit is passed on without its context's
// cancellation, so that the store's lease fence, not an early context
// check, is what must reject it — as for a zombie in another process that
// nobody can cancel. It also feeds the recovery clock with every
// successful epoch commit.
type faultStore struct {
	*faultinject.LeaseAudit
	sim  *sim
	life *life

	// held are attempts answered "outcome unknown" that have not reached
	// the store yet; they land at a later commit of the same life.
	heldMu sync.Mutex
	held   []*store.Txn
}

func newFaultStore(st store.Store, s *sim, l *life) *faultStore {
	return &faultStore{LeaseAudit: faultinject.NewLeaseAudit(st), sim: s, life: l}
}

// tails is the store's store.SequenceTails when the scenario draws
// SourceWake (Config.SourceWake); nil otherwise: the store cannot tell, as
// a store without it.
func (f *faultStore) tails() store.SequenceTails {
	if t, ok := f.LeaseAudit.Store.(store.SequenceTails); ok && f.sim.sc.Config.SourceWake {
		return t
	}
	return nil
}

// SequenceEnd implements store.SequenceTails (see tails).
func (f *faultStore) SequenceEnd(table store.Table, prefix []byte) (uint64, bool) {
	if t := f.tails(); t != nil {
		return t.SequenceEnd(table, prefix)
	}
	return 0, false
}

// WatchSequence implements store.SequenceTails (see tails).
func (f *faultStore) WatchSequence(table store.Table, prefix []byte) (uint64, <-chan struct{}, bool) {
	if t := f.tails(); t != nil {
		return t.WatchSequence(table, prefix)
	}
	return 0, nil, false
}

// errFailing is what the store answers once a WAL fault fired: the disk
// under it is failing, and the process is about to restart.
var errFailing = fmt.Errorf("chaos: the disk under the store failed: %w", pstore.ErrBroken)

// guard recovers a panic escaping a store call. Pebble panics when a
// commit meets its log writer's recorded I/O error; since 409b87f
// store/pebble turns that into an ambiguous, breaking failure (see
// TestWALErrorDoesNotPanic), so this is a backstop. In a real process such
// a panic is a crash; here the life is marked crashed, the call fails, and
// the driver restarts the process on a copy of the filesystem as the crash
// left it.
func (f *faultStore) guard(err *error) {
	if r := recover(); r != nil {
		f.life.crashed(r)
		*err = &store.AmbiguousError{Err: fmt.Errorf("chaos: the store panicked, the process dies: %v", r)}
	}
}

// Timestamp implements store.Store (it may write the timestamp ceiling).
func (f *faultStore) Timestamp(ctx context.Context) (ts store.Timestamp, err error) {
	if f.life.fault.injected.Load() > 0 {
		return 0, errFailing
	}
	defer f.guard(&err)
	return f.Store.Timestamp(ctx)
}

// CreateLease implements store.Store (it may write the lease-id block).
func (f *faultStore) CreateLease(ctx context.Context, timeout time.Duration) (id store.LeaseID, err error) {
	if f.life.fault.injected.Load() > 0 {
		return 0, errFailing
	}
	defer f.guard(&err)
	return f.Store.CreateLease(ctx, timeout)
}

// Commit implements store.Store with the audit and the injected faults.
func (f *faultStore) Commit(ctx context.Context, txn *store.Txn) (err error) {
	if f.life.fault.injected.Load() > 0 {
		return errFailing
	}
	defer f.guard(&err)
	s := f.sim
	zombie := f.AnyEnded(txn.Prerequisites())
	if zombie {
		ctx = context.WithoutCancel(ctx)
		s.stats.add(func(st *Stats) { st.ZombieAttempts++ })
	}
	part := epochPartition(txn)
	mode := 0 // 0 normal, 1 apply then report ambiguous, 2 drop and report ambiguous, 3 hold and land later
	if part != "" && !zombie && s.sc.Faults.Ambiguous &&
		decide(s.sc.Seed, "ambiguous", part, s.passages.next("ambiguous|"+part), s.sc.AmbiguousProb) && s.ambiguousBudget.take() {
		mode = 1 + int(s.passages.next("ambiguous-mode")%3)
	}
	f.landHeld(ctx)
	if mode == 3 {
		f.heldMu.Lock()
		f.held = append(f.held, txn.Clone())
		f.heldMu.Unlock()
		s.stats.add(func(st *Stats) { st.AmbiguousLate++ })
		return &store.AmbiguousError{Err: errors.New("chaos: no answer; the commit is still on its way")}
	}
	if mode == 2 {
		s.stats.add(func(st *Stats) { st.AmbiguousLost++ })
		return &store.AmbiguousError{Err: errors.New("chaos: connection lost before the commit reached the store")}
	}
	switch {
	case s.opts.sabotage == sabotageAcceptZombies && zombie:
		txn = rebuild(txn, false, func(store.Mutation) bool { return true })
	case s.opts.sabotage == sabotageDropStateWrites:
		txn = rebuild(txn, true, func(m store.Mutation) bool { return m.Table != store.States && m.Table != store.ExternalStates })
	case s.opts.sabotage == sabotageDropFrontierWrites:
		txn = rebuild(txn, true, func(m store.Mutation) bool {
			return m.Table != store.FlowState || !bytes.HasPrefix(m.Key, []byte("dedup_frontier\x00"))
		})
	}
	err = f.Store.Commit(ctx, txn)
	if zombie && err == nil {
		s.stats.add(func(st *Stats) { st.ZombieAccepted++ })
	}
	if zombie && errors.Is(err, store.ErrLeaseLost) {
		s.stats.add(func(st *Stats) { st.ZombieRejected++ })
	}
	if err == nil && part != "" && len(txn.Mutations()) > 1 {
		s.recovery.committed(transport.PartitionID(part))
	}
	if mode == 1 && err == nil {
		s.stats.add(func(st *Stats) { st.AmbiguousApplied++ })
		return &store.AmbiguousError{Err: errors.New("chaos: acknowledgement of an applied commit lost")}
	}
	return err
}

// landHeld lets the held attempts land now, half of the time (so some
// land only after several more commits).
func (f *faultStore) landHeld(ctx context.Context) {
	f.heldMu.Lock()
	if len(f.held) == 0 || f.sim.passages.next("late-landing")%2 == 0 {
		f.heldMu.Unlock()
		return
	}
	held := f.held
	f.held = nil
	f.heldMu.Unlock()
	for _, txn := range held {
		if err := f.Store.Commit(context.WithoutCancel(ctx), txn); err == nil {
			f.sim.stats.add(func(st *Stats) { st.LateApplied++ })
		} else {
			f.sim.stats.add(func(st *Stats) { st.LateRejected++ })
		}
	}
}

// rebuild copies txn, with its lease prerequisites if leases is set, keeping
// the mutations keep accepts (sabotage: see Options). Without the leases it
// also drops the partition_transactions guard: an epoch commit has two
// fences — the lease, and the guard that fails a zombie's commit once its
// replacement committed — and accepting zombies means breaking both.
func rebuild(txn *store.Txn, leases bool, keep func(store.Mutation) bool) *store.Txn {
	var out *store.Txn
	if leases {
		out = store.NewTxn(txn.Prerequisites()...)
	} else {
		out = store.NewTxn()
	}
	for _, m := range txn.Mutations() {
		if !keep(m) {
			continue
		}
		switch m.Kind {
		case store.Put:
			out.Put(m.Table, m.Key, m.Value)
		case store.Delete:
			out.Delete(m.Table, m.Key)
		case store.DeleteRange:
			out.DeleteRange(m.Table, m.Key, m.End)
		case store.Append:
			out.Append(m.Table, m.Key, m.Value)
		}
	}
	for _, c := range txn.Checks() {
		if !leases && c.Table == store.PartitionTransactions {
			continue
		}
		if c.Absent {
			out.CheckAbsent(c.Table, c.Key)
		} else {
			out.CheckValue(c.Table, c.Key, c.Value)
		}
	}
	return out
}

// epochPartition returns the partition of a job's lease-fenced commit (its
// partition_transactions row), or "" for other commits.
func epochPartition(txn *store.Txn) string {
	if len(txn.Prerequisites()) == 0 {
		return ""
	}
	ms := txn.Mutations()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Table == store.PartitionTransactions && ms[i].Kind == store.Put {
			return string(ms[i].Key)
		}
	}
	return ""
}

// walFault fails WAL writes or syncs (F3) once armed, after letting skip
// of them through, and keeps failing them on that WAL file, like a failed
// disk: Pebble then reports the commit as ambiguous and the store turns
// broken; the simulation restarts the process.
//
// It injects only while the current memtable has ample room. Pebble
// panics when a WAL rotation (a memtable switch) meets a failed log
// writer, and that panic unlocks an unlocked mutex, which no recover can
// catch: the test process would die with the simulated one. Pebble grows
// memtables from 256 KiB, doubling per WAL file up to MemTableSize, so the
// injector tracks the WAL files it has seen and the bytes written to the
// newest, and fails an operation only if the memtable is far from full.
// The faultStore also refuses commits once the fault fired, so that few
// commits are inside Pebble when the store breaks. (What is left of the
// window is recovered as a process crash: see faultStore.guard.)
type walFault struct {
	sync     atomic.Bool
	armed    atomic.Bool
	skip     atomic.Int64
	injected atomic.Int64
	firstAt  atomic.Int64 // unix nanos of the first injected error

	maxMem uint64
	mu     sync.Mutex
	files  int    // WAL files created in this life
	cur    string // the newest WAL file
	bytes  int64  // bytes written to it
	failed string // the WAL file the fault hit
}

// maybeError decides the fate of a write or sync of WAL file path.
func (f *walFault) maybeError(path string, isSync bool, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !isSync && path == f.cur {
		f.bytes += int64(n)
	}
	if f.failed != "" {
		if path == f.failed {
			return errInjected
		}
		return nil
	}
	if !f.armed.Load() || path != f.cur || isSync != f.sync.Load() {
		return nil
	}
	capacity := min(uint64(256<<10)<<max(0, f.files-1), f.maxMem)
	if uint64(f.bytes)*3+(512<<10) >= capacity {
		return nil // a rotation might come soon: not now
	}
	if f.skip.Add(-1) >= 0 {
		return nil
	}
	f.failed = path
	f.injected.Add(1)
	f.firstAt.Store(time.Now().UnixNano())
	return errInjected
}

// disarm stops further injection and reports whether the fault fired.
// Both happen under the lock maybeError holds, so a fault cannot fire
// after disarm has reported that it did not.
func (f *walFault) disarm() (fired bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed.Store(false)
	return f.injected.Load() > 0
}

func (f *walFault) created(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files++
	f.cur, f.bytes = path, 0
}

var errInjected = errors.New("chaos: injected WAL I/O error")

// walFS wraps a filesystem so that WAL files (*.log) consult a walFault.
type walFS struct {
	vfs.FS
	fault *walFault
}

func (fs walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, err)
}

func (fs walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, f, err)
}

func (fs walFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	fs.fault.created(name)
	return &walFile{File: f, path: name, fault: fs.fault}, nil
}

type walFile struct {
	vfs.File
	path  string
	fault *walFault
}

func (f *walFile) Write(p []byte) (int, error) {
	if err := f.fault.maybeError(f.path, false, len(p)); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fault.maybeError(f.path, false, len(p)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *walFile) Sync() error {
	if err := f.fault.maybeError(f.path, true, 0); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *walFile) SyncData() error {
	if err := f.fault.maybeError(f.path, true, 0); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *walFile) SyncTo(length int64) (bool, error) {
	if err := f.fault.maybeError(f.path, true, 0); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}
