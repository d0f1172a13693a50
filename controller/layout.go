package controller

import (
	"context"
	"sync"
	"time"

	"github.com/weir-stream/weir/plan"
)

// The layout: key-hash ranges for keyed computations, one partition per
// source partition for source computations. Partitions are never removed.
//
// Sources are listed once synchronously, before the first cycle takes the
// controller's mutex, and then every SourceRelistPeriod on a background
// goroutine: a listing is an external call (a Kafka metadata request can
// take 30 s), and a cycle blocked on it would delay the lease pings until
// every lease expired and every job restarted. A cycle starts a listing
// when one is due and none is in flight, and a later cycle adds a partition
// (and a job) for every source partition the finished listing found (a
// Kafka topic's partition count grew).
//
// A source that cannot be listed (a broker that cannot be reached, a
// missing topic) is an error, never an empty source: the computation has
// no partition until a listing succeeds, so it and everything downstream
// cannot complete, and a drain cannot finish (its source partitions may
// hold undelivered outputs). The listing is retried in the background with
// the restart backoff (RestartBackoff doubling up to RestartBackoffMax);
// the first failure and the recovery go to Warnf, repeated failures to its
// rate-limited summary, and Sources reports them for status. The other
// computations are laid out and run meanwhile.

// listing is the result of listing every source once.
type listing struct {
	keys map[string][]string // source computation → its source partitions
	errs map[string]error
}

// listSources asks each source computation's source for its partitions. It
// reads only the immutable configured plan (cfg.Plan: a rescale replaces
// c.plan, but never a source computation, whose partitions are its
// source's): callers need not hold the mutex (and must not, as it may be
// slow; it runs on the lister's goroutine).
func (c *Controller) listSources(ctx context.Context) listing {
	l := listing{keys: map[string][]string{}, errs: map[string]error{}}
	for _, name := range c.cfg.Plan.Order() {
		comp := c.cfg.Plan.Computations[name]
		if !comp.IsSource() {
			continue
		}
		keys, err := comp.Source.Partitions(ctx)
		if err != nil {
			l.errs[name] = err
			continue
		}
		l.keys[name] = keys
	}
	return l
}

// sourceList is the listing state of one source computation.
type sourceList struct {
	// listed: a listing succeeded; the computation's partitions are laid out.
	listed bool
	// failures counts consecutive failed listings; lastErr is the last one's
	// error, at lastErrAt.
	failures  int
	lastErr   error
	lastErrAt time.Time
	// retryAt: while not listed, the next listing starts at or after it.
	retryAt time.Time
}

// firstLayout lays out every partition on the first cycle, listing the
// sources without holding the mutex. A source that cannot be listed gets
// its partitions from a later, background listing (see above).
//
// It also settles the adoptees (adopt.go): those the layout has a place for
// become its jobs; the others' leases are aborted, and no cycle decides
// anything until every one of those aborts has returned.
func (c *Controller) firstLayout(ctx context.Context) error {
	c.mu.Lock()
	done := c.laidOut
	var refused []Adoptee
	if done {
		refused, c.adoptees = c.adoptees, nil // an earlier refusal failed
	}
	c.mu.Unlock()
	if done {
		return c.refuseAdoptees(ctx, refused)
	}
	l := c.listSources(ctx)
	if err := ctx.Err(); err != nil {
		return err // the listing was cut short: not a failure of the source
	}
	return c.refuseAdoptees(ctx, c.layOut(l))
}

// layOut makes the first layout from the sources' listing l and installs
// the adoptees; it returns those it could not. REQUIRES: c.mu not held.
func (c *Controller) layOut(l listing) []Adoptee {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.laidOut {
		return nil // a concurrent Cycle did it
	}
	for _, name := range c.plan.Order() {
		comp := c.plan.Computations[name]
		if comp.IsSource() {
			continue
		}
		for i := 0; i < comp.Partitions; i++ {
			lo, hi, toEnd := plan.PartitionRange(i, comp.Partitions)
			c.addPartition(comp, plan.PartitionSpec{ID: plan.KeyedPartitionID(name, i), Index: i, Lo: lo, Hi: hi, ToEnd: toEnd})
		}
	}
	now := c.cfg.Store.Now()
	c.applyListing(l, true, now)
	c.laidOut = true
	c.listing.startedAt = now
	return c.adoptLaidOut(now)
}

// relist consumes a finished background listing and starts the next one
// when due: every SourceRelistPeriod, and sooner while a source that was
// never listed waits for its retry. REQUIRES: c.mu held.
func (c *Controller) relist(now time.Time) {
	if l, ok := c.listing.take(); ok {
		c.applyListing(l, false, now)
	}
	due := now.Sub(c.listing.startedAt) >= c.cfg.SourceRelistPeriod
	for _, sl := range c.sources {
		due = due || !sl.listed && !now.Before(sl.retryAt)
	}
	if due && c.listing.start(c.listSources) {
		c.listing.startedAt = now
	}
}

// sourcesListed reports whether every source computation has been listed.
// REQUIRES: c.mu held.
func (c *Controller) sourcesListed() bool {
	for _, sl := range c.sources {
		if !sl.listed {
			return false
		}
	}
	return c.laidOut
}

// applyListing adds a partition for every listed source partition not yet
// in the layout, and records failed listings. REQUIRES: c.mu held.
func (c *Controller) applyListing(l listing, first bool, now time.Time) {
	for _, name := range c.plan.Order() {
		comp := c.plan.Computations[name]
		if !comp.IsSource() {
			continue
		}
		sl := c.sources[name]
		if sl == nil {
			sl = &sourceList{}
			c.sources[name] = sl
		}
		if err := l.errs[name]; err != nil {
			c.sourceListingFailed(name, sl, err, now)
			continue
		}
		if sl.failures > 0 {
			c.cfg.Warnf("the partitions of %s's source are listed again, after %d failed listing(s)", name, sl.failures)
			delete(c.flog.pendingSources, name)
		}
		sl.listed, sl.failures, sl.lastErr = true, 0, nil
		for _, k := range l.keys[name] {
			id := plan.SourcePartitionID(name, k)
			if _, ok := c.partitions[id]; ok {
				continue
			}
			if !first {
				c.cfg.Logf("controller: source partition %s appeared; starting a job for it", id)
			}
			c.addPartition(comp, plan.PartitionSpec{ID: id, SourceKey: k})
		}
	}
}

func (c *Controller) addPartition(comp *plan.CompPlan, spec plan.PartitionSpec) {
	c.partitions[spec.ID] = &partition{comp: comp, spec: spec}
	c.order = append(c.order, spec.ID)
}

// lister runs background source listings, one at a time, under its own
// mutex (never the controller's).
type lister struct {
	// startedAt is when the last listing started (store clock). Guarded by
	// the controller's mutex.
	startedAt time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running bool
	done    *listing
	count   int
}

func (l *lister) init() { l.ctx, l.cancel = context.WithCancel(context.Background()) }

// start runs list on a new goroutine unless a listing is in flight or a
// finished one waits to be taken; it reports whether it started one.
func (l *lister) start(list func(context.Context) listing) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running || l.done != nil || l.ctx.Err() != nil {
		return false
	}
	l.running = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		res := list(l.ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.running = false
		l.done = &res
		l.count++
	}()
	return true
}

// take returns a finished listing, once.
func (l *lister) take() (listing, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		return listing{}, false
	}
	res := *l.done
	l.done = nil
	return res, true
}

func (l *lister) completed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// stop cancels a listing in flight and waits for it, at most wait: a
// source that ignores its context is abandoned.
func (l *lister) stop(wait time.Duration) {
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
