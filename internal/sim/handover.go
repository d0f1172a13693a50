package sim

import (
	"fmt"
	"slices"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/transport"
)

// Handover replaces the controller by a new one, as a new leader of the
// distributed mode takes over (cluster/adopt.go): the new controller loads
// the persisted state and is offered every running job, except those of
// the partitions in drop, whose leases are aborted first — as a new leader
// aborts every recorded lease it does not adopt. The job of misfit, if
// given, is offered with a partition spec that is not the layout's (a
// changed key range): the controller must stop it and abort its lease
// before any job starts. The old controller is forgotten (a deposed one,
// fenced in the distributed mode, acts no more); its jobs' later epochs
// commit under the new one.
func (s *Sim) Handover(drop []transport.PartitionID, misfit transport.PartitionID) error {
	if s.pendingApply != nil {
		return fmt.Errorf("sim: the previous cycle's apply half has not run")
	}
	s.handovers++
	ctl, err := s.newController(fmt.Sprintf("h%d.", s.handovers))
	if err != nil {
		return err
	}
	if err := ctl.Load(s.ctx); err != nil {
		return err
	}
	var offer []controller.Adoptee
	for _, w := range s.Workers {
		for _, p := range sortedKeys(w.jobs) {
			sj := w.jobs[p]
			if sj.stopped || sj.done {
				continue
			}
			if slices.Contains(drop, p) {
				s.printf("not offered: %s (its lease %s aborted)\n", sj.spec.JobID, sj.spec.Lease)
				if err := s.Store.AbortLease(s.ctx, sj.spec.Lease); err != nil {
					return err
				}
				sj.Stop() // as its worker does at the new leader's first heartbeat
				continue
			}
			a := controller.Adoptee{JobID: sj.spec.JobID, Comp: sj.spec.Comp.Name, Partition: sj.spec.Partition,
				Lease: sj.spec.Lease, Worker: w, Incarnation: w.incarnation, Handle: sj}
			if p == misfit {
				a.Partition.Index++
			}
			offer = append(offer, a)
		}
	}
	if err := ctl.Adopt(controller.Adoptable(s.ctx, s.Store, offer, s.logf)); err != nil {
		return err
	}
	s.Ctl = ctl
	return nil
}
