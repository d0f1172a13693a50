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

// Commit implements store.Store with the audit and the injected faults.
func (f *FaultStore) Commit(ctx context.Context, txn *store.Txn) error {
	zombie := f.AnyEnded(txn.Prerequisites())
	f.mu.Lock()
	if zombie {
		f.ZombieAttempts++
	}
	mode := 0 // 0 normal, 1 apply+ambiguous, 2 drop+ambiguous
	if len(txn.Prerequisites()) > 0 && !txn.Empty() && f.ambBudget > 0 && f.rnd.Float64() < f.ambiguousP {
		f.ambBudget--
		mode = 1 + f.rnd.IntN(2)
	}
	f.mu.Unlock()

	var err error
	switch mode {
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
