package enginetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"

	"github.com/weir-stream/weir/internal/faultinject"
	"github.com/weir-stream/weir/store"
)

// FaultStore wraps a store to inject faults a real deployment meets: lost
// lease pings (the lease then expires), and ambiguous commits (the commit
// applied, or not, and the caller is told the outcome is unknown). It also
// audits zombie writes: commits naming a lease after that lease was aborted
// or found expired.
type FaultStore struct {
	*faultinject.LeaseAudit

	mu         sync.Mutex
	rnd        *rand.Rand
	ambiguousP float64
	ambBudget  int

	// ZombieAttempts counts commits naming an ended lease; ZombieAccepted
	// counts those that succeeded (must stay 0).
	ZombieAttempts, ZombieAccepted int
	// AmbiguousApplied / AmbiguousLost count injected ambiguous outcomes.
	AmbiguousApplied, AmbiguousLost int

	lateP      float64
	lateBudget int
	// held are ambiguous attempts that have not reached the store yet: they
	// land later, after other commits (a networked store's delayed packet).
	held []*store.Txn
	// LateHeld counts attempts held back; LateApplied and LateRejected count
	// how their late landings went (an attempt may apply late only if no
	// retry of its epoch applied before it).
	LateHeld, LateApplied, LateRejected int
}

// NewFaultStore wraps st.
func NewFaultStore(st store.Store, seed uint64) *FaultStore {
	return &FaultStore{LeaseAudit: faultinject.NewLeaseAudit(st), rnd: rand.New(rand.NewPCG(seed, 5))}
}

// InjectAmbiguous makes epoch commits (those with a lease prerequisite)
// ambiguous with probability p, at most budget times; half of them apply.
func (f *FaultStore) InjectAmbiguous(p float64, budget int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ambiguousP, f.ambBudget = p, budget
}

// InjectLate makes epoch commits ambiguous with probability p, at most
// budget times, without applying them then: each such attempt is held and
// lands later, after one to three further commits of any job (or at
// LandHeld), as a commit whose acknowledgement was lost in a network could.
func (f *FaultStore) InjectLate(p float64, budget int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lateP, f.lateBudget = p, budget
}

// LandHeld lets every held attempt land now.
func (f *FaultStore) LandHeld(ctx context.Context) {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.mu.Unlock()
	for _, txn := range held {
		f.land(ctx, txn)
	}
}

// land commits a held attempt to the store and records how it went.
func (f *FaultStore) land(ctx context.Context, txn *store.Txn) {
	err := f.Store.Commit(ctx, txn)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.LateApplied++
	} else {
		f.LateRejected++
	}
}

// Commit implements store.Store with the audit and the injected faults.
func (f *FaultStore) Commit(ctx context.Context, txn *store.Txn) error {
	zombie := f.AnyEnded(txn.Prerequisites())
	f.mu.Lock()
	if zombie {
		f.ZombieAttempts++
	}
	mode := 0 // 0 normal, 1 apply+ambiguous, 2 drop+ambiguous, 3 hold and land later
	epochCommit := len(txn.Prerequisites()) > 0 && !txn.Empty()
	switch {
	case epochCommit && f.ambBudget > 0 && f.rnd.Float64() < f.ambiguousP:
		f.ambBudget--
		mode = 1 + f.rnd.IntN(2)
	case epochCommit && f.lateBudget > 0 && f.rnd.Float64() < f.lateP:
		f.lateBudget--
		mode = 3
	}
	var landing []*store.Txn
	if len(f.held) > 0 && f.rnd.IntN(3) == 0 {
		landing, f.held = f.held, nil
	}
	if mode == 3 {
		f.LateHeld++
		f.held = append(f.held, txn.Clone())
	}
	f.mu.Unlock()
	for _, h := range landing {
		f.land(ctx, h)
	}

	var err error
	switch mode {
	case 3:
		return &store.AmbiguousError{Err: errors.New("injected: no answer yet; the commit is still on its way")}
	case 2:
		f.mu.Lock()
		f.AmbiguousLost++
		f.mu.Unlock()
		return &store.AmbiguousError{Err: errors.New("injected: connection lost before the commit reached the store")}
	default:
		err = f.Store.Commit(ctx, txn)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if zombie && err == nil {
		f.ZombieAccepted++
	}
	if mode == 1 && err == nil {
		f.AmbiguousApplied++
		return &store.AmbiguousError{Err: errors.New("injected: acknowledgement of an applied commit lost")}
	}
	return err
}

// Zombies returns the zombie audit.
func (f *FaultStore) Zombies() (attempts, accepted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ZombieAttempts, f.ZombieAccepted
}
