package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// ErrDeposed says the controller lost its leadership (a standby took over):
// it must not act any more; it may campaign again as a standby.
var ErrDeposed = errors.New("cluster: this controller is no longer the active one")

// ControllerConfig configures a controller process.
type ControllerConfig struct {
	// ID names the controller (in the leader row and logs).
	ID string
	// Admin is the controller's admin address, recorded in the leader row
	// so that operators' commands find the active controller.
	Admin string
	Store store.Store
	// SpecName and SpecText: the pipeline spec (its file name and bytes).
	SpecName   string
	SpecText   []byte
	Classes    *weir.Registry
	Connectors *connector.Registry
	Dial       func(addr string) (grpc.ClientConnInterface, error)
	// LeaseTimeout: the leadership lease's timeout (a standby takes over
	// within it, plus Poll, of the active controller's death); default 5s.
	LeaseTimeout time.Duration
	// Poll: how often a standby looks at the leader row (default 500ms).
	Poll time.Duration
	// ForgetWorkersAfter: the registration of a worker that answers no
	// heartbeat for this long is removed (default
	// DefaultForgetWorkersAfter; registrationGC).
	ForgetWorkersAfter time.Duration
	// Pool's periods (see PoolConfig).
	SyncPeriod, CallTimeout, RefreshPeriod time.Duration
	Logf, Warnf                            func(format string, args ...any)
	// Elected is called once this controller leads, with its running
	// engine (for status and the admin API).
	Elected func(*Active)
}

// countersPeriod is how often the active controller stores the pipeline's
// counters (counterKeeper): what a worker counted in the last period before
// it died and the controller failed over is not in the next term's totals.
const countersPeriod = time.Second

// Active is a controller that leads: its engine and pool.
type Active struct {
	Engine     *engine.Engine
	Pool       *Pool
	Leadership *Leadership
}

// RunController campaigns until this controller is the active one, then
// runs the pipeline on the registered workers until ctx ends (then it
// resigns, so a standby takes over at once), the pipeline completes or
// stops, or the leadership is lost (ErrDeposed).
func RunController(ctx context.Context, cfg ControllerConfig) (controller.State, error) {
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = 5 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Warnf == nil {
		cfg.Warnf = cfg.Logf
	}
	sp, err := spec.Parse(cfg.SpecText, cfg.SpecName)
	if err != nil {
		return "", err
	}
	l, err := Campaign(ctx, cfg.Store, LeaderRecord{ID: cfg.ID, Admin: cfg.Admin}, cfg.LeaseTimeout, cfg.Poll)
	if err != nil {
		return "", err
	}
	cfg.Warnf("controller %s is active (term %d)", cfg.ID, l.Term())
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go l.Keep(lctx, cfg.LeaseTimeout/5)
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-lctx.Done():
		}
	}()
	st := Fence(cfg.Store, l)
	deposed := make(chan struct{})
	specHash := SpecHash(cfg.SpecText)
	pool := NewPool(PoolConfig{Store: cfg.Store, Term: l.Term(), SpecHash: specHash, Dial: cfg.Dial,
		SyncPeriod: cfg.SyncPeriod, CallTimeout: cfg.CallTimeout, RefreshPeriod: cfg.RefreshPeriod, Logf: cfg.Logf,
		AliveTimeout: sp.Dynamic.LostJobTimeout.Std(),
		Deposed:      func() { close(deposed); cancel() }})
	adoptees, err := takeOver(lctx, st, pool, specHash, cfg.Logf)
	if err != nil {
		return "", deposedOr(l, err)
	}
	v, _ := json.Marshal(storedSpec{Name: cfg.SpecName, Text: cfg.SpecText})
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(specKey), v)
	if err := st.Commit(lctx, txn); err != nil {
		return "", deposedOr(l, fmt.Errorf("cluster: store the spec: %w", err))
	}
	eng, err := engine.New(lctx, engine.Config{Spec: sp, Store: st, Classes: cfg.Classes, Connectors: cfg.Connectors,
		Logf: cfg.Logf, Warnf: cfg.Warnf, Pool: pool, Balance: true,
		// Job ids unique across terms: workers report exits by id.
		JobIDPrefix: fmt.Sprintf("t%d.", l.Term())})
	if err != nil {
		return "", deposedOr(l, err)
	}
	if err := eng.Controller().Adopt(adoptees); err != nil {
		return "", err
	}
	pool.cfg.Board = eng.Board()
	keeper, err := loadCounters(lctx, cfg.Store, eng.Board(), l.Term())
	if err != nil {
		return "", deposedOr(l, err)
	}
	pool.cfg.Baseline = keeper.Baseline
	pool.SetController(eng.Controller(), eng.Plan())
	go pool.Run(lctx)
	go keeper.run(lctx, st, pool, countersPeriod, cfg.Logf)
	go forgetWorkers(lctx, st, pool, cfg.ForgetWorkersAfter, cfg.Warnf)
	if cfg.Elected != nil {
		cfg.Elected(&Active{Engine: eng, Pool: pool, Leadership: l})
	}
	state, err := eng.Run(lctx)
	select {
	case <-deposed:
		return state, ErrDeposed
	default:
	}
	if l.Err() != nil {
		return state, fmt.Errorf("%w: %v", ErrDeposed, l.Err())
	}
	// The last counts, while the leadership holds (the fenced commit
	// refuses them otherwise).
	if serr := keeper.save(context.WithoutCancel(ctx), st, pool); serr != nil {
		cfg.Logf("%v", serr)
	}
	cancel()
	if rerr := l.Resign(context.WithoutCancel(ctx)); rerr != nil {
		cfg.Logf("cluster: resign: %v", rerr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = ctx.Err()
	}
	return state, err
}

// takeOver surveys the workers, chooses the jobs to adopt, aborts every
// other recorded lease, and returns the adopted jobs (adopt.go).
func takeOver(ctx context.Context, st *FencedStore, pool *Pool, specHash string, logf func(string, ...any)) ([]controller.Adoptee, error) {
	found, err := pool.survey(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: survey the workers: %w", err)
	}
	recorded, err := st.Recorded(ctx)
	if err != nil {
		return nil, err
	}
	chosen := pool.adoptable(ctx, st, found, recorded, specHash)
	keep := make(map[store.LeaseID]bool, len(chosen))
	for _, a := range chosen {
		keep[a.Lease] = true
	}
	n, err := st.AbortRecorded(ctx, recorded, keep)
	if err != nil {
		return nil, err
	}
	if n > 0 || len(chosen) > 0 {
		logf("cluster: adopting %d jobs of earlier controllers, aborted %d other job leases", len(chosen), n)
	}
	return chosen, nil
}

// forgetWorkers sweeps the registrations of silent workers (registrationGC)
// until ctx ends: every tenth of after, at least every second and at most
// every 30 s.
func forgetWorkers(ctx context.Context, st store.Store, p *Pool, after time.Duration, warnf func(string, ...any)) {
	if after <= 0 {
		after = DefaultForgetWorkersAfter
	}
	g := &registrationGC{after: after, seen: map[Registration]time.Time{}}
	t := time.NewTicker(min(max(after/10, time.Second), 30*time.Second))
	defer t.Stop()
	for {
		removed, err := g.sweep(ctx, st, p, p.cfg.Store.Now())
		for _, id := range removed {
			warnf("worker %s answered no heartbeat for %v: its registration is removed", id, after)
		}
		if err != nil && ctx.Err() == nil {
			p.cfg.Logf("cluster: sweep worker registrations: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deposedOr returns ErrDeposed if the leadership was lost, else err.
func deposedOr(l *Leadership, err error) error {
	if l.Err() != nil || store.Classify(err) == store.ClassLeaseLost {
		return fmt.Errorf("%w: %v", ErrDeposed, err)
	}
	return err
}
