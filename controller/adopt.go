package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// Adoption: a controller that takes over from an earlier one (a new leader
// of the distributed mode) may keep the jobs that controller left running
// instead of aborting every lease and starting every job again, which
// stalls the whole pipeline for the restarts (issue 27, item 2).
//
// Safety does not depend on adoption: a job commits only while its lease
// lives, and the taker-over decides, before any cycle, which leases it
// keeps (the adoptees') and aborts all others. What adoption must keep is
// the central invariant — at most one live lease per partition — and the
// taker-over's ownership of every live lease. The caller (cluster) offers
// only jobs whose lease its predecessor recorded, that a worker reported
// running after it accepted the new term (so no deposed controller can
// start or stop a job there any more) and that run the same spec, and
// passes them through Adoptable: a partition claimed by two jobs is
// adopted for neither, and a lease must be alive. The controller then installs an adoptee
// only where its computation and partition are exactly a partition of its
// own layout: anything else (a spec's layout changed, a source partition
// not listed now) is stopped and its lease aborted before the first cycle
// ends. From then on an adopted job is a job like those this controller
// started: its lease is pinged (the first cycle pings it), checked,
// aborted when the job is removed.

// Adoptee is a running job of an earlier controller offered to this one.
type Adoptee struct {
	JobID     plan.JobID
	Comp      string
	Partition plan.PartitionSpec
	Lease     store.LeaseID
	// Layout is the layout the job routes by (nil: the spec's counts).
	Layout plan.Layout
	Worker Worker
	// Incarnation of Worker that runs the job.
	Incarnation int
	Handle      Handle
}

// Adoptable returns the offers that may be adopted: those alone on their
// partition (two jobs claiming one partition: neither, whichever may be a
// zombie) whose lease a ping finds alive — which also extends it by a
// lease timeout, time enough for the first cycle to ping it again. The
// caller has kept only jobs that cannot be reached by the controller they
// leave (cluster: a worker that accepted the new term) and whose lease a
// controller created for them.
func Adoptable(ctx context.Context, st store.Store, offers []Adoptee, logf func(string, ...any)) []Adoptee {
	claims := map[transport.PartitionID]int{}
	for _, a := range offers {
		claims[a.Partition.ID]++
	}
	var out []Adoptee
	for _, a := range offers {
		if n := claims[a.Partition.ID]; n > 1 {
			logf("controller: job %s is not adopted: %d running jobs claim partition %s", a.JobID, n, a.Partition.ID)
			continue
		}
		if err := st.PingLease(ctx, a.Lease); err != nil {
			logf("controller: job %s is not adopted: ping of its lease %s: %v", a.JobID, a.Lease, err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// Adopt offers jobs left running by an earlier controller; the first
// layout installs those it can (see above). It must be called before the
// first cycle; a later call is refused.
func (c *Controller) Adopt(jobs []Adoptee) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.laidOut {
		return errors.New("controller: Adopt after the first layout")
	}
	c.adoptees = append(c.adoptees, jobs...)
	return nil
}

// adoptLaidOut installs the adoptees whose partition is in the layout and
// returns the others. REQUIRES: c.mu held, the layout made.
func (c *Controller) adoptLaidOut(now time.Time) []Adoptee {
	var rest []Adoptee
	for _, a := range c.adoptees {
		p, ok := c.partitions[a.Partition.ID]
		if !ok || p.comp.Name != a.Comp || p.spec != a.Partition || p.job != nil || !c.runsLayout(a.Layout) {
			if ok && p.job == nil {
				// The partition's next lease must wait for this one's
				// abort (startJob checks it under invariants).
				p.lastLease = a.Lease
			}
			rest = append(rest, a)
			continue
		}
		p.job = &jobEntry{id: a.JobID, lease: a.Lease, worker: a.Worker, incarnation: a.Incarnation, handle: a.Handle,
			startedAt: now} // pingedAt zero: the first cycle pings the lease
		p.lastLease = a.Lease
		c.cfg.Board.Assign(p.spec.ID, a.JobID)
		c.stats.JobsAdopted++
		c.cfg.Logf("controller: adopted job %s of %s on worker %s (%s)", a.JobID, p.spec.ID, a.Worker.ID(), a.Lease)
	}
	c.adoptees = nil
	return rest
}

// refuseAdoptees stops the adoptees the layout has no place for and aborts
// their leases (each a barrier), before any job starts. An abort that fails
// is an error of the first layout, which is tried again.
func (c *Controller) refuseAdoptees(ctx context.Context, rest []Adoptee) error {
	for i, a := range rest {
		c.mu.Lock()
		cur, fits := c.plan.Layout(), c.runsLayout(a.Layout)
		c.mu.Unlock()
		if fits {
			c.cfg.Logf("controller: not adopting job %s of %s: no such partition of %s in this layout", a.JobID, a.Partition.ID, a.Comp)
		} else {
			c.cfg.Logf("controller: not adopting job %s of %s: it routes by the layout %s, this controller's is %s", a.JobID, a.Partition.ID, a.Layout, cur)
		}
		a.Handle.Stop()
		if err := c.cfg.Store.AbortLease(ctx, a.Lease); err != nil {
			c.mu.Lock()
			c.adoptees = append(c.adoptees, rest[i:]...)
			c.mu.Unlock()
			return fmt.Errorf("controller: abort lease %s of job %s, not adopted: %w", a.Lease, a.JobID, err)
		}
	}
	return nil
}

// runsLayout reports whether a job routing by layout l (nil: the spec's
// counts) routes as this controller's jobs do: a job of an earlier layout
// would send to partitions by ranges they no longer have. REQUIRES: c.mu
// held.
func (c *Controller) runsLayout(l plan.Layout) bool {
	if l == nil {
		l = c.specLayoutLocked()
	}
	return maps.Equal(l, c.plan.Layout())
}
