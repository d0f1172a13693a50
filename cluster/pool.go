package cluster

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport/remote"
)

// PoolConfig configures the active controller's view of the workers.
type PoolConfig struct {
	Store    store.Store
	Board    *board.Board
	Term     uint64
	SpecHash string
	// Dial connects to a worker (wire.Security.Dial).
	Dial func(addr string) (grpc.ClientConnInterface, error)
	// SyncPeriod is the heartbeat period (default 100ms); CallTimeout
	// bounds each call (default 1s); RefreshPeriod is how often the
	// registrations are read (default 1s).
	SyncPeriod, CallTimeout, RefreshPeriod time.Duration
	// Deposed is called (once) when a worker says a higher term is active.
	Deposed func()
	// AliveTimeout is the controller's lost-worker timeout, for Status
	// (default 3s).
	AliveTimeout time.Duration
	// Baseline, if set, returns the counts of a worker's life that Board
	// holds already (an earlier term heard them; cluster/counters.go): the
	// pool adds only what the life counted beyond them.
	Baseline func(worker string, incarnation uint64) map[string]board.Counters
	Logf     func(format string, args ...any)
}

// Pool is the set of registered workers as the active controller sees them
// (controller.Pool): each is heartbeaten on its own goroutine, so a worker
// that does not answer delays no other.
type Pool struct {
	cfg  PoolConfig
	ctl  *controller.Controller
	plan *plan.Plan

	mu      sync.Mutex
	workers map[string]*RemoteWorker
	list    []controller.Worker
	deposed sync.Once
	// regs are the registrations Run read last (removeGone), regsRead
	// whether it read any yet: the counter keeper's view too, so that it
	// does not scan them again every period.
	regs     []Registration
	regsRead bool
}

// NewPool returns an empty pool; SetController must be called before Run.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 100 * time.Millisecond
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = time.Second
	}
	if cfg.RefreshPeriod <= 0 {
		cfg.RefreshPeriod = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Deposed == nil {
		cfg.Deposed = func() {}
	}
	if cfg.AliveTimeout <= 0 {
		cfg.AliveTimeout = 3 * time.Second
	}
	return &Pool{cfg: cfg, workers: map[string]*RemoteWorker{}}
}

// SetController tells the pool whose layout its heartbeats carry.
func (p *Pool) SetController(c *controller.Controller, pl *plan.Plan) { p.ctl, p.plan = c, pl }

// Workers implements controller.Pool.
func (p *Pool) Workers() []controller.Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.list
}

// Worker returns the registered worker id (nil if unknown).
func (p *Pool) Worker(id string) *RemoteWorker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers[id]
}

// Run reads the registrations and heartbeats every worker until ctx ends.
// A worker whose registration is gone (it exited cleanly: drained, or
// stopped) leaves the pool: its heartbeats stop, and jobs still recorded
// on it count as exited.
func (p *Pool) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(p.cfg.RefreshPeriod)
	defer t.Stop()
	for {
		regs, err := Registrations(ctx, p.cfg.Store)
		if err != nil {
			p.cfg.Logf("cluster: read worker registrations: %v", err)
		}
		for _, r := range regs {
			if w := p.add(ctx, r); w != nil {
				wg.Add(1)
				go func() { defer wg.Done(); w.run(w.ctx) }()
			}
		}
		if err == nil {
			p.removeGone(regs)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// add records a registration; it returns a worker whose heartbeats have
// not started yet (new to the pool, or known from the survey only).
func (p *Pool) add(ctx context.Context, r Registration) *RemoteWorker {
	w := p.entry(ctx, r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.beating {
		return nil
	}
	w.beating = true
	return w
}

// entry returns the pool's worker of a registration, added if new (its
// heartbeats not started), its address updated otherwise.
func (p *Pool) entry(ctx context.Context, r Registration) *RemoteWorker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[r.ID]; ok {
		w.mu.Lock()
		w.addr = r.Addr
		w.mu.Unlock()
		w.checkVersion(r.Version, r.Release)
		return w
	}
	w := &RemoteWorker{pool: p, id: r.ID, addr: r.Addr, handles: map[plan.JobID]*RemoteHandle{}, counters: map[string]board.Counters{}}
	w.checkVersion(r.Version, r.Release)
	w.ctx, w.cancel = context.WithCancel(ctx)
	p.workers[r.ID] = w
	p.relist()
	p.cfg.Logf("cluster: worker %s registered at %s", r.ID, r.Addr)
	return w
}

// registrations returns the registrations Run read last (at most
// RefreshPeriod ago), false before its first successful read.
func (p *Pool) registrations() ([]Registration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regs, p.regsRead
}

// removeGone drops the workers that have no registration in regs, the
// registrations just read, and keeps regs (registrations).
func (p *Pool) removeGone(regs []Registration) {
	registered := make(map[string]bool, len(regs))
	for _, r := range regs {
		registered[r.ID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.regs, p.regsRead = regs, true
	removed := false
	for id, w := range p.workers {
		if registered[id] {
			continue
		}
		removed = true
		w.cancel()
		delete(p.workers, id)
		w.mu.Lock()
		for jid, h := range w.handles {
			h.setDone(fmt.Errorf("worker %s left (unregistered) while running %s", id, jid))
		}
		w.handles = map[plan.JobID]*RemoteHandle{}
		w.mu.Unlock()
		p.cfg.Logf("cluster: worker %s left (its registration is gone)", id)
	}
	if removed {
		p.relist()
	}
}

// relist rebuilds the id-ordered worker list. REQUIRES: p.mu held.
func (p *Pool) relist() {
	ids := make([]string, 0, len(p.workers))
	for id := range p.workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p.list = make([]controller.Worker, len(ids))
	for i, id := range ids {
		p.list[i] = p.workers[id]
	}
}

// addrOf returns a worker's transport address.
func (p *Pool) addrOf(id string) string {
	if w := p.Worker(id); w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.addr
	}
	return ""
}

// heartbeatLogPeriod bounds how often a worker's failing heartbeats are
// logged (one line at the first failure, then one per period).
const heartbeatLogPeriod = 10 * time.Second

// RemoteWorker is a worker process as the controller sees it
// (controller.Worker): alive while it answers heartbeats.
type RemoteWorker struct {
	pool *Pool
	id   string
	// ctx ends the worker's heartbeats (cancel: it left the pool).
	ctx    context.Context
	cancel context.CancelFunc
	// failures counts consecutive failed heartbeats; failLogged is when
	// one was last logged (heartbeat errors are logged at the first
	// failure, then at most every heartbeatLogPeriod). Only run touches
	// them.
	failures   int
	failLogged time.Time
	// beating: Run started its heartbeats. Guarded by the pool's mu.
	beating bool

	mu   sync.Mutex
	addr string
	// version and release: the worker's protocol version (0: not known
	// yet, or a build before versions — read as 1) and build, from its
	// registration or its last answer. A version more than one apart from
	// this controller's gets no job and no heartbeat (usable).
	version     int
	release     string
	conn        grpc.ClientConnInterface
	connAddr    string
	incarnation uint64
	lastBeat    time.Time // store clock
	draining    bool
	handles     map[plan.JobID]*RemoteHandle
	counters    map[string]board.Counters
	countersInc uint64
}

// ID implements controller.Worker.
func (w *RemoteWorker) ID() string { return w.id }

// Incarnation implements controller.Worker.
func (w *RemoteWorker) Incarnation() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.incarnation)
}

// AliveAt implements controller.Worker: the worker answered a heartbeat
// within timeout before now, and speaks a compatible protocol version.
func (w *RemoteWorker) AliveAt(now time.Time, timeout time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usableLocked() && !w.lastBeat.IsZero() && now.Sub(w.lastBeat) < timeout
}

// usableLocked reports whether the worker's protocol version interoperates
// with this controller's. REQUIRES: w.mu held.
func (w *RemoteWorker) usableLocked() bool { return compatible(w.version, ProtocolVersion) }

// checkVersion records the worker's protocol version and release (from its
// registration or an answer), logs when the worker turns unusable, and
// reports whether it is usable.
func (w *RemoteWorker) checkVersion(version int, release string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.version == 0 || w.usableLocked() // 0: not known yet
	w.version = versionOf(version)
	if release != "" {
		w.release = release
	}
	usable := w.usableLocked()
	if was && !usable {
		w.pool.cfg.Logf("cluster: %s", incompatibleWorker(w.id, version))
	}
	return usable
}

// call sends one Sync on conn within CallTimeout; a worker that says a
// higher term is active deposes this controller.
func (w *RemoteWorker) call(ctx context.Context, conn grpc.ClientConnInterface, req *SyncRequest) (*SyncReply, error) {
	cctx, cancel := context.WithTimeout(ctx, w.pool.cfg.CallTimeout)
	defer cancel()
	rep, err := invoke[SyncRequest, SyncReply](cctx, conn, "Sync", req)
	if isDeposed(err) {
		w.pool.deposedNow()
	}
	return rep, err
}

// Load implements controller.Worker: jobs started and not known to have exited.
func (w *RemoteWorker) Load() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, h := range w.handles {
		if !h.isDone() {
			n++
		}
	}
	return n
}

// LastHeartbeat implements controller.Heartbeater.
func (w *RemoteWorker) LastHeartbeat() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastBeat
}

// Draining implements controller.Drainer.
func (w *RemoteWorker) Draining() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.draining
}

func (w *RemoteWorker) client() (grpc.ClientConnInterface, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil && w.connAddr == w.addr {
		return w.conn, nil
	}
	c, err := w.pool.cfg.Dial(w.addr)
	if err != nil {
		return nil, err
	}
	w.conn, w.connAddr = c, w.addr
	return c, nil
}

// Start implements controller.Worker with a Start call.
func (w *RemoteWorker) Start(s plan.JobSpec) (controller.Handle, error) {
	conn, err := w.client()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	inc := w.incarnation
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.pool.cfg.CallTimeout)
	defer cancel()
	req := &StartRequest{Term: w.pool.cfg.Term, Version: ProtocolVersion, SpecHash: w.pool.cfg.SpecHash, Comp: s.Comp.Name, Partition: s.Partition,
		JobID: s.JobID, Lease: s.Lease, Seed: s.Seed, Incarnation: inc, Fences: s.Fences}
	if s.Plan != nil {
		req.Layout = s.Plan.Layout()
		w.mu.Lock()
		v := versionOf(w.version)
		w.mu.Unlock()
		if v < 3 && !maps.Equal(req.Layout, w.pool.ctl.SpecLayout()) {
			return nil, fmt.Errorf("worker %s speaks control protocol version %d, which runs the spec's partition counts, not the rescaled layout %s: upgrade it", w.id, v, req.Layout)
		}
	}
	if _, err := invoke[StartRequest, StartReply](ctx, conn, "Start", req); err != nil {
		if isDeposed(err) {
			w.pool.deposedNow()
		}
		return nil, fmt.Errorf("worker %s: start %s: %w", w.id, s.JobID, err)
	}
	h := &RemoteHandle{w: w, id: s.JobID}
	w.mu.Lock()
	w.handles[s.JobID] = h
	w.mu.Unlock()
	return h, nil
}

func (p *Pool) deposedNow() {
	p.deposed.Do(func() {
		p.cfg.Logf("cluster: a worker reports a controller with a higher term: this controller is deposed")
		p.cfg.Deposed()
	})
}

// run heartbeats the worker every SyncPeriod until ctx ends, and five
// times as often while the controller rescales a computation: the quiesce
// control goes out, and the jobs' quiesced and first reports come back,
// with heartbeats, and the computation takes no input meanwhile.
func (w *RemoteWorker) run(ctx context.Context) {
	t := time.NewTicker(max(time.Millisecond, w.pool.cfg.SyncPeriod/rescaleSyncFactor))
	defer t.Stop()
	for {
		last := time.Now()
		w.syncOnce(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if time.Since(last) >= w.pool.cfg.SyncPeriod || w.pool.rescaling() {
				break
			}
		}
	}
}

// rescaleSyncFactor: heartbeats are this many times as frequent while a
// rescale is under way.
const rescaleSyncFactor = 5

// rescaling reports whether the controller is rescaling a computation.
func (p *Pool) rescaling() bool { return p.ctl != nil && p.ctl.Rescaling() }

// syncOnce sends one heartbeat and applies the reply.
func (w *RemoteWorker) syncOnce(ctx context.Context) {
	p := w.pool
	if p.ctl == nil {
		return
	}
	w.mu.Lock()
	usable := w.usableLocked()
	w.mu.Unlock()
	if !usable {
		return // until its registration says otherwise (a new release)
	}
	conn, err := w.client()
	if err != nil {
		return
	}
	req := &SyncRequest{Term: p.cfg.Term, Version: ProtocolVersion, Controls: map[string]board.Control{}}
	for _, name := range p.plan.Order() {
		req.Controls[name] = p.cfg.Board.Control(name)
	}
	for _, ps := range p.ctl.Partitions() {
		if ps.Job != "" {
			req.Routes = append(req.Routes, remote.Route{Partition: ps.Partition, Worker: ps.Worker, Addr: p.addrOf(ps.Worker), Lease: ps.Lease})
		}
	}
	w.mu.Lock()
	for id, h := range w.handles {
		switch {
		case h.isDone():
		case h.stop:
			req.Stop = append(req.Stop, id)
		case h.finish:
			req.Finish = append(req.Finish, id)
		}
	}
	req.Keep = w.keepList()
	w.mu.Unlock()
	rep, err := w.call(ctx, conn, req)
	if err != nil {
		if !isDeposed(err) && status.Code(err) != codes.Canceled && ctx.Err() == nil {
			w.failures++
			if w.failures == 1 || time.Since(w.failLogged) >= heartbeatLogPeriod {
				w.failLogged = time.Now()
				p.cfg.Logf("cluster: heartbeat of worker %s: %v (%d failed in a row)", w.id, err, w.failures)
			}
		}
		return
	}
	if w.failures > 0 {
		p.cfg.Logf("cluster: worker %s answers heartbeats again after %d failed", w.id, w.failures)
		w.failures = 0
	}
	if !w.checkVersion(rep.Version, "") {
		return
	}
	now := p.cfg.Store.Now()
	for _, s := range rep.Statuses {
		p.cfg.Board.Post(s) // the board keeps only the current job's
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rep.Incarnation != w.incarnation {
		// A new life: every job of the earlier one is gone (the controller
		// sees the incarnation change and replaces them).
		for _, h := range w.handles {
			h.setDone(fmt.Errorf("worker %s restarted", w.id))
		}
		w.handles = map[plan.JobID]*RemoteHandle{}
		w.incarnation = rep.Incarnation
	}
	w.lastBeat, w.draining = now, rep.Draining
	for id, msg := range rep.Exited {
		if h, ok := w.handles[id]; ok {
			var err error
			if msg != "" {
				err = fmt.Errorf("%s", msg)
			}
			h.setDone(err)
			delete(w.handles, id)
		}
	}
	w.addCounters(rep)
}

// addCounters adds the growth of the worker's cumulative counters to the
// board's totals. REQUIRES: w.mu held.
func (w *RemoteWorker) addCounters(rep *SyncReply) {
	if w.countersInc != rep.Incarnation {
		w.counters, w.countersInc = map[string]board.Counters{}, rep.Incarnation
		if w.pool.cfg.Baseline != nil {
			maps.Copy(w.counters, w.pool.cfg.Baseline(w.id, rep.Incarnation))
		}
	}
	for comp, c := range rep.Counters {
		w.pool.cfg.Board.AddCounters(comp, sub(c, w.counters[comp]))
		w.counters[comp] = c
	}
}

// Drain asks the worker to drain.
func (w *RemoteWorker) Drain(ctx context.Context) error {
	conn, err := w.client()
	if err != nil {
		return err
	}
	_, err = invoke[DrainRequest, DrainReply](ctx, conn, "Drain", &DrainRequest{})
	return err
}

// RemoteHandle is a job on a remote worker (controller.Handle and
// controller.Finisher): Stop and Finish travel in the next heartbeats
// until the worker reports the job exited.
type RemoteHandle struct {
	w  *RemoteWorker
	id plan.JobID
	// adopted: a job of an earlier term this controller took over (Keep).
	adopted bool
	// guarded by w.mu
	stop, finish bool
	done         bool
	err          error
}

// Stop implements controller.Handle.
func (h *RemoteHandle) Stop() {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.stop = true
}

// Finish implements controller.Finisher.
func (h *RemoteHandle) Finish() {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.finish = true
}

// Done implements controller.Handle.
func (h *RemoteHandle) Done() (bool, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.done, h.err
}

// REQUIRES: h.w.mu held.
func (h *RemoteHandle) isDone() bool { return h.done }

// REQUIRES: h.w.mu held.
func (h *RemoteHandle) setDone(err error) { h.done, h.err = true, err }

// WorkerStatus describes one worker for the admin API.
type WorkerStatus struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// Version is the worker's control protocol version, Release its build;
	// Incompatible: more than one version apart from the controller's.
	Version      int    `json:"version"`
	Release      string `json:"release,omitempty"`
	Incompatible bool   `json:"incompatible,omitempty"`
	Incarnation  uint64 `json:"incarnation"`
	Alive        bool   `json:"alive"`
	Draining     bool   `json:"draining"`
	Jobs         int    `json:"jobs"`
}

// Status lists the workers.
func (p *Pool) Status() []WorkerStatus {
	now := p.cfg.Store.Now()
	var out []WorkerStatus
	for _, cw := range p.Workers() {
		w := cw.(*RemoteWorker)
		alive := w.AliveAt(now, p.cfg.AliveTimeout)
		jobs := w.Load()
		w.mu.Lock()
		out = append(out, WorkerStatus{ID: w.id, Addr: w.addr, Version: w.version, Release: w.release, Incompatible: !w.usableLocked(),
			Incarnation: w.incarnation, Alive: alive, Draining: w.draining, Jobs: jobs})
		w.mu.Unlock()
	}
	return out
}

// CanRescale implements controller.RescalePool: every live worker must
// speak control protocol version 3 or later — an older one neither
// quiesces a computation (the rescale would wait for it, time out and try
// again for good) nor runs a job on another layout than the spec's.
func (p *Pool) CanRescale() error {
	now := p.cfg.Store.Now()
	for _, cw := range p.Workers() {
		w := cw.(*RemoteWorker)
		if !w.AliveAt(now, p.cfg.AliveTimeout) {
			continue
		}
		w.mu.Lock()
		v, release := versionOf(w.version), w.release
		w.mu.Unlock()
		if v < 3 {
			return fmt.Errorf("worker %s (%s) speaks control protocol version %d, which cannot take part in a rescale (version 3): upgrade it first", w.id, orNone(release), v)
		}
	}
	return nil
}
