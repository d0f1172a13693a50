package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/transport/remote"
	"github.com/weir-stream/weir/worker"
)

// specKey is the flow_state row holding the spec the active controller runs.
const specKey = "cluster/spec"

// storedSpec is the content of the spec row.
type storedSpec struct {
	Name string `json:"name"`
	Text []byte `json:"text"`
}

// SpecHash names a spec's text.
func SpecHash(text []byte) string {
	h := sha256.Sum256(text)
	return hex.EncodeToString(h[:8])
}

// WorkerConfig configures a worker process.
type WorkerConfig struct {
	// ID names the worker (default: its address); Addr is the transport
	// address other workers reach it at (what it listens on).
	ID, Addr   string
	Store      store.Store
	Classes    *weir.Registry
	Connectors *connector.Registry
	// Dial connects to other workers (wire.Security.Dial).
	Dial func(addr string) (grpc.ClientConnInterface, error)
	// LostTimeout: without a heartbeat of the active controller for this
	// long, the worker stops its jobs (a controller that lost it replaced
	// them; they are fenced anyway) — but not before the pipeline's
	// lease_timeout has passed too: until then their leases may live, and
	// a new leader taking over from a dead one may adopt them. Default 3s.
	LostTimeout time.Duration
	BufferBytes int
	Hooks       job.Hooks
	// Release is the build's release (weir's version), registered for
	// status.
	Release string
	Logf    func(format string, args ...any)
}

// Worker is a worker process: it runs the jobs the active controller starts
// on it, on the engine's own job code, with a network transport
// (transport/remote) and a board whose statuses and controls travel in the
// controller's heartbeats (Sync).
type Worker struct {
	cfg         WorkerConfig
	planMu      sync.Mutex // serializes plan loading
	node        *remote.Node
	board       *board.Board
	incarnation uint64

	mu       sync.Mutex
	term     uint64
	specHash string
	plan     *plan.Plan
	runner   *worker.Worker
	// leaseTimeout is the plan's job lease timeout (Run's fence waits for
	// it too).
	leaseTimeout time.Duration
	jobs         map[plan.JobID]*runningJob
	exited       map[plan.JobID]exitRecord
	lastSync     time.Time
	draining     bool
	fenced       bool // jobs stopped for want of heartbeats
	// emptySyncs counts the heartbeats answered while draining with no
	// job left (Drained).
	emptySyncs int
}

type runningJob struct {
	h    *worker.JobHandle
	term uint64
	// leaving: asked to stop or finish; a survey does not offer it for
	// adoption.
	leaving bool
}

// stop stops the job; finish stops it after its epoch in flight. REQUIRES:
// w.mu held.
func (j *runningJob) stop()   { j.leaving = true; j.h.Stop() }
func (j *runningJob) finish() { j.leaving = true; j.h.Finish() }

type exitRecord struct {
	err string
	at  time.Time
}

// exitedRetention is how long a worker reports a job's exit.
const exitedRetention = time.Minute

// NewWorker registers the worker in the store under a new incarnation.
func NewWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if cfg.Store == nil || cfg.Classes == nil || cfg.Connectors == nil || cfg.Dial == nil || cfg.Addr == "" {
		return nil, errors.New("cluster: worker config lacks store, classes, connectors, dial or address")
	}
	if cfg.ID == "" {
		cfg.ID = cfg.Addr
	}
	if cfg.LostTimeout <= 0 {
		cfg.LostTimeout = 3 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	inc, err := cfg.Store.Timestamp(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: worker incarnation: %w", err)
	}
	w := &Worker{cfg: cfg, board: board.NewBoard(), incarnation: uint64(inc),
		node:   remote.NewNode(remote.Config{Worker: cfg.ID, Addr: cfg.Addr, BufferBytes: cfg.BufferBytes, Dial: cfg.Dial, Logf: cfg.Logf}),
		jobs:   map[plan.JobID]*runningJob{},
		exited: map[plan.JobID]exitRecord{}, lastSync: time.Now()}
	if err := Register(ctx, cfg.Store, w.registration()); err != nil {
		return nil, err
	}
	return w, nil
}

// registration is the worker's row in the store.
func (w *Worker) registration() Registration {
	return Registration{ID: w.cfg.ID, Addr: w.cfg.Addr, Incarnation: w.incarnation, Version: ProtocolVersion, Release: w.cfg.Release}
}

// Node returns the worker's transport node.
func (w *Worker) Node() *remote.Node { return w.node }

// Incarnation returns the worker's life.
func (w *Worker) Incarnation() uint64 { return w.incarnation }

// Register serves the worker's control plane and transport on s.
func (w *Worker) Register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			unary("Sync", w.sync),
			unary("Start", w.start),
			unary("Drain", w.drainCall),
		},
	}, w)
	w.node.Register(s)
}

// checkTerm refuses a controller whose protocol version is more than one
// apart or that is deposed, and records a new term. The jobs of earlier
// terms keep running until the new controller's first Sync that is not a
// survey settles them (settleLocked): it may adopt them. REQUIRES: w.mu
// held.
func (w *Worker) checkTermLocked(term uint64, version int) error {
	if !compatible(version, ProtocolVersion) {
		return errVersion(w.cfg.ID, version)
	}
	if term < w.term {
		return errDeposed
	}
	if term > w.term {
		if w.term != 0 {
			w.cfg.Logf("cluster: worker %s: controller term %d replaces %d", w.cfg.ID, term, w.term)
		}
		w.term = term
	}
	return nil
}

// settleLocked makes the jobs of earlier terms that keep lists the current
// term's (adopted) and stops the others: the new leader aborted their
// leases before it sent its first Sync that is not a survey. REQUIRES: w.mu
// held.
func (w *Worker) settleLocked(keep []plan.JobID) {
	for id, j := range w.jobs {
		if j.term >= w.term {
			continue
		}
		if slices.Contains(keep, id) {
			j.term = w.term
			w.cfg.Logf("cluster: worker %s: %s adopted by term %d", w.cfg.ID, id, w.term)
			continue
		}
		j.stop()
	}
}

// surveyLocked answers a survey: the worker's jobs in detail. REQUIRES: w.mu
// held.
func (w *Worker) surveyLocked() *SyncReply {
	rep := &SyncReply{Worker: w.cfg.ID, Version: ProtocolVersion, Incarnation: w.incarnation, Draining: w.draining, SpecHash: w.specHash}
	for id, j := range w.jobs {
		s := j.h.Spec()
		rep.Running = append(rep.Running, id)
		if j.leaving {
			continue
		}
		pl := s.Plan
		if pl == nil {
			pl = w.plan
		}
		rj := RunningJob{ID: id, Comp: s.Comp.Name, Partition: s.Partition, Lease: s.Lease, Term: j.term}
		if pl != nil {
			rj.Layout = pl.Layout()
		}
		rep.Jobs = append(rep.Jobs, rj)
	}
	return rep
}

func (w *Worker) sync(_ context.Context, req *SyncRequest) (*SyncReply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.checkTermLocked(req.Term, req.Version); err != nil {
		return nil, err
	}
	w.lastSync, w.fenced = time.Now(), false
	if req.Survey {
		return w.surveyLocked(), nil
	}
	w.settleLocked(req.Keep)
	if w.draining && len(w.jobs) == 0 {
		w.emptySyncs++
	}
	for comp, c := range req.Controls {
		w.board.SetControl(comp, raise(w.board.Control(comp), c))
	}
	w.node.SetRoutes(req.Routes)
	for _, id := range req.Stop {
		if j, ok := w.jobs[id]; ok {
			j.stop()
		}
	}
	for _, id := range req.Finish {
		if j, ok := w.jobs[id]; ok {
			j.finish()
		}
	}
	rep := &SyncReply{Worker: w.cfg.ID, Version: ProtocolVersion, Incarnation: w.incarnation, Draining: w.draining,
		Counters: w.board.Counters(), Exited: map[plan.JobID]string{}}
	for id, j := range w.jobs {
		rep.Running = append(rep.Running, id)
		if s, ok := w.board.Status(j.h.Spec().Partition.ID); ok && s.Job == id {
			rep.Statuses = append(rep.Statuses, s)
		}
	}
	now := time.Now()
	for id, e := range w.exited {
		if now.Sub(e.at) > exitedRetention {
			delete(w.exited, id)
			continue
		}
		rep.Exited[id] = e.err
	}
	return rep, nil
}

// raise returns the control c with its watermarks never below prev's: a
// new leader may publish a lower watermark than its predecessor did (it
// persists them only now and then), but one a job already used stays true.
func raise(prev, c board.Control) board.Control {
	if len(prev.InputSystemWM) > 0 {
		wm := make(map[string]store.Timestamp, len(c.InputSystemWM))
		for s, v := range c.InputSystemWM {
			wm[s] = v
		}
		for s, v := range prev.InputSystemWM {
			wm[s] = max(wm[s], v)
		}
		c.InputSystemWM = wm
	}
	if c.EventWM.Before(prev.EventWM) {
		c.EventWM = prev.EventWM
	}
	return c
}

func (w *Worker) start(ctx context.Context, req *StartRequest) (*StartReply, error) {
	w.mu.Lock()
	if err := w.checkTermLocked(req.Term, req.Version); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	if req.Incarnation != 0 && req.Incarnation != w.incarnation {
		w.mu.Unlock()
		return nil, status.Errorf(codes.Aborted, "worker %s restarted: incarnation %d, not %d", w.cfg.ID, w.incarnation, req.Incarnation)
	}
	if w.draining {
		w.mu.Unlock()
		return nil, status.Errorf(codes.Unavailable, "worker %s is draining", w.cfg.ID)
	}
	term := w.term
	w.mu.Unlock()
	runner, pl, err := w.planFor(ctx, req.SpecHash)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "worker %s: %v", w.cfg.ID, err)
	}
	comp, ok := pl.Computations[req.Comp]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "worker %s: no computation %q in spec %s", w.cfg.ID, req.Comp, req.SpecHash)
	}
	js := plan.JobSpec{Comp: comp, Partition: req.Partition, JobID: req.JobID, Lease: req.Lease, Seed: req.Seed}
	if len(req.Layout) > 0 {
		// The controller's layout, which a rescale may have changed since
		// the spec was written (controller/rescale.go).
		if js.Plan, err = pl.WithLayout(req.Layout); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "worker %s: %v", w.cfg.ID, err)
		}
		js.Comp = js.Plan.Computations[req.Comp]
	}
	p := req.Partition.ID
	for from, lease := range req.Fences {
		w.node.FenceBelow(from, lease)
	}
	w.board.Assign(p, req.JobID)
	w.node.JobStarted(p, req.Lease)
	h, err := runner.StartJob(js)
	if err != nil {
		w.node.JobEnded(p, req.Lease)
		return nil, status.Errorf(codes.Internal, "worker %s: %v", w.cfg.ID, err)
	}
	w.mu.Lock()
	w.jobs[req.JobID] = &runningJob{h: h, term: term}
	w.mu.Unlock()
	w.cfg.Logf("cluster: worker %s: started %s (%s)", w.cfg.ID, req.JobID, req.Lease)
	go func() {
		h.Wait()
		_, jerr := h.Done()
		w.node.JobEnded(p, req.Lease)
		w.mu.Lock()
		if rj, ok := w.jobs[req.JobID]; ok && rj.h == h {
			delete(w.jobs, req.JobID) // never another job's entry
		}
		msg := ""
		if jerr != nil {
			msg = jerr.Error()
		}
		w.exited[req.JobID] = exitRecord{err: msg, at: time.Now()}
		w.mu.Unlock()
		st := w.node.Stats()
		w.cfg.Logf("cluster: worker %s: %s exited (%s); transport: %d pushed, %d acked, %d fenced, %d retries", w.cfg.ID, req.JobID, orNone(msg), st.Pushed, st.Acked, st.Fenced, st.Retried)
	}()
	return &StartReply{}, nil
}

// planFor returns the job runner of the spec named hash, loading the spec
// from the store when it is not the one loaded.
func (w *Worker) planFor(ctx context.Context, hash string) (*worker.Worker, *plan.Plan, error) {
	w.planMu.Lock()
	defer w.planMu.Unlock()
	w.mu.Lock()
	if w.specHash == hash && w.runner != nil {
		defer w.mu.Unlock()
		return w.runner, w.plan, nil
	}
	busy := len(w.jobs) > 0
	w.mu.Unlock()
	if busy {
		return nil, nil, fmt.Errorf("runs jobs of spec %s, asked for %s: restart the worker after the old spec's jobs ended", w.specHash, hash)
	}
	v, ok, err := w.cfg.Store.Get(ctx, store.FlowState, []byte(specKey))
	if err != nil {
		return nil, nil, fmt.Errorf("read the spec: %w", err)
	}
	if !ok {
		return nil, nil, errors.New("no spec in the store: start a controller")
	}
	var ss storedSpec
	if err := json.Unmarshal(v, &ss); err != nil {
		return nil, nil, fmt.Errorf("the stored spec: %w", err)
	}
	if SpecHash(ss.Text) != hash {
		return nil, nil, fmt.Errorf("the store holds spec %s, the controller runs %s", SpecHash(ss.Text), hash)
	}
	sp, err := spec.Parse(ss.Text, ss.Name)
	if err != nil {
		return nil, nil, err
	}
	pl, err := engine.BuildPlan(ctx, sp, w.cfg.Classes, w.cfg.Connectors, w.cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	node := w.node
	node.SetRowLimit(transport.RowLimit(pl.MaxBatchRows()))
	env := worker.Env{Plan: pl, Store: w.cfg.Store, Board: w.board, Hooks: w.cfg.Hooks, Logf: w.cfg.Logf,
		Endpoint:  func(s plan.JobSpec) job.Transport { return node.Endpoint(s.Partition.ID, s.Lease) },
		CloseWait: engine.SinkCloseWait(sp)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.plan, w.specHash, w.leaseTimeout = pl, hash, sp.Dynamic.LeaseTimeout.Std()
	w.runner = worker.New(w.cfg.ID, w.cfg.Store, env)
	return w.runner, pl, nil
}

func (w *Worker) drainCall(context.Context, *DrainRequest) (*DrainReply, error) {
	w.Drain()
	return &DrainReply{}, nil
}

// Drain makes the worker take no new job and report draining, so that the
// controller moves its jobs away (gracefully); Jobs tells when it is empty.
func (w *Worker) Drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.draining = true
}

// Drained reports whether a draining worker may exit: it has no job left
// and the controller has heard of every exit. A reply carrying every exit
// record was sent at an empty heartbeat, and another heartbeat arrived
// after it — a controller sends its next heartbeat only after applying the
// last reply — so the controller has removed the jobs and restarted their
// partitions elsewhere at once. Exiting at zero jobs, before that, left
// the partitions waiting for the lost-job timeout. A worker no controller
// heartbeats (fenced) has nobody to tell and is drained at zero jobs.
func (w *Worker) Drained() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.draining && len(w.jobs) == 0 && (w.emptySyncs >= 2 || w.fenced)
}

// Jobs returns the number of jobs running.
func (w *Worker) Jobs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

// Run watches the controller's heartbeats until ctx ends: without one for
// LostTimeout and the plan's lease timeout, every job stops (the
// controller declared the worker lost and replaced them, or their leases
// expired with no leader to adopt them; they cannot commit, so stopping
// them only frees the worker). When ctx ends, every job stops and the worker unregisters.
func (w *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.LostTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.shutdown()
			return nil
		case <-t.C:
		}
		w.mu.Lock()
		if limit := max(w.cfg.LostTimeout, w.leaseTimeout); !w.fenced && time.Since(w.lastSync) > limit {
			w.fenced = true
			w.cfg.Logf("cluster: worker %s: no heartbeat from a controller for %v; stopping its %d jobs", w.cfg.ID, time.Since(w.lastSync).Round(time.Millisecond), len(w.jobs))
			for _, j := range w.jobs {
				j.stop()
			}
		}
		fenced := w.fenced
		w.mu.Unlock()
		if fenced {
			w.registerAgain(ctx)
		}
	}
}

// registerAgain writes the worker's registration again if it is gone: a
// controller removes the row of a worker it has not heard for a long time
// (registrationGC), and one cut off that long is otherwise never heard of
// again once the network heals.
func (w *Worker) registerAgain(ctx context.Context) {
	if ok, err := Registered(ctx, w.cfg.Store, w.cfg.ID); err == nil && !ok {
		if err := Register(ctx, w.cfg.Store, w.registration()); err == nil {
			w.cfg.Logf("cluster: worker %s: its registration was gone; registered again", w.cfg.ID)
		}
	}
}

func (w *Worker) shutdown() {
	w.mu.Lock()
	runner, pl := w.runner, w.plan
	w.mu.Unlock()
	if runner != nil {
		runner.Shutdown()
	}
	w.node.Close()
	if pl != nil {
		for _, name := range pl.Order() {
			if src := pl.Computations[name].Source; src != nil {
				_ = src.Close()
			}
		}
	}
	_ = Unregister(context.Background(), w.cfg.Store, w.cfg.ID)
}

func orNone(s string) string {
	if s == "" {
		return "cleanly"
	}
	return s
}
