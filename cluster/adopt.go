package cluster

import (
	"context"
	"sync"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
)

// A new leader adopts the jobs its predecessor left running instead of
// restarting every job (issue 27, item 2). The steps, in RunController:
//
//  1. survey: a Sync with Survey set to every registered worker. A worker
//     that answers has accepted the new term: from then on it refuses every
//     call of a deposed controller, so no earlier leader starts or stops a
//     job there any more, and its answer lists every job it runs.
//  2. choose (adoptable): a job is adopted if it runs the spec this leader
//     runs, its lease was recorded by a leader (FencedStore.CreateLease: a
//     lease that could not be recorded was aborted), and
//     controller.Adoptable takes it: no other answer claims its partition,
//     and a ping of its lease succeeds — so it is alive and lives another
//     lease timeout, which the controller's first cycle extends.
//  3. abort every other recorded lease (AbortRecorded; each a barrier), as
//     a leader without adoption aborted them all.
//  4. the controller installs the adopted jobs where its layout has their
//     partition and aborts the rest (controller/adopt.go); the pool's
//     heartbeats name them in Keep, and each worker stops every job of an
//     earlier term not kept.
//
// A deposed leader that has not yet noticed can still ping or abort the
// adopted leases (those calls pass its fence): a ping is harmless, an abort
// makes the job fail and be replaced, as any lost lease does. It cannot
// create a live lease (the record needs its leadership) nor reach a job
// through a surveyed worker.

// surveyed is one worker's answer to a survey.
type surveyed struct {
	w   *RemoteWorker
	rep *SyncReply
}

// survey asks every registered worker, in parallel, for its jobs, and adds
// each to the pool with the incarnation and the heartbeat of its answer. A
// worker that does not answer within CallTimeout gets nothing adopted.
func (p *Pool) survey(ctx context.Context) ([]surveyed, error) {
	regs, err := Registrations(ctx, p.cfg.Store)
	if err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		out []surveyed
		wg  sync.WaitGroup
	)
	for _, r := range regs {
		w := p.entry(ctx, r)
		wg.Go(func() {
			rep, ok := w.surveyOnce(ctx)
			if ok {
				mu.Lock()
				out = append(out, surveyed{w: w, rep: rep})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, nil
}

// surveyOnce sends one survey Sync and records the worker's life.
func (w *RemoteWorker) surveyOnce(ctx context.Context) (*SyncReply, bool) {
	p := w.pool
	conn, err := w.client()
	if err != nil {
		return nil, false
	}
	rep, err := w.call(ctx, conn, &SyncRequest{Term: p.cfg.Term, Version: ProtocolVersion, Survey: true})
	if err != nil {
		p.cfg.Logf("cluster: survey of worker %s: %v (none of its jobs is adopted)", w.id, err)
		return nil, false
	}
	if !w.checkVersion(rep.Version, "") {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.incarnation, w.lastBeat, w.draining = rep.Incarnation, p.cfg.Store.Now(), rep.Draining
	return rep, true
}

// adoptable chooses the jobs to adopt from the survey's answers (step 2
// above): those on the spec specHash whose lease is in recorded, passed
// through controller.Adoptable (alone on their partition, a live lease).
// Each gets a handle the pool's heartbeats name in Keep.
func (p *Pool) adoptable(ctx context.Context, st store.Store, found []surveyed, recorded map[store.LeaseID]bool, specHash string) []controller.Adoptee {
	var offers []controller.Adoptee
	for _, s := range found {
		if s.rep.SpecHash != specHash {
			if len(s.rep.Jobs) > 0 {
				p.cfg.Logf("cluster: worker %s runs spec %s, not %s: none of its %d jobs is adopted", s.w.id, orNone(s.rep.SpecHash), specHash, len(s.rep.Jobs))
			}
			continue
		}
		for _, j := range s.rep.Jobs {
			if recorded[j.Lease] {
				offers = append(offers, controller.Adoptee{JobID: j.ID, Comp: j.Comp, Partition: j.Partition, Layout: j.Layout,
					Lease: j.Lease, Worker: s.w, Incarnation: int(s.rep.Incarnation), Handle: &RemoteHandle{w: s.w, id: j.ID, adopted: true}})
			}
		}
	}
	chosen := controller.Adoptable(ctx, st, offers, p.cfg.Logf)
	for _, a := range chosen {
		h := a.Handle.(*RemoteHandle)
		h.w.mu.Lock()
		h.w.handles[a.JobID] = h
		h.w.mu.Unlock()
	}
	return chosen
}

// keepList returns the adopted jobs a heartbeat names in Keep. REQUIRES:
// w.mu held.
func (w *RemoteWorker) keepList() []plan.JobID {
	var keep []plan.JobID
	for id, h := range w.handles {
		if h.adopted && !h.done {
			keep = append(keep, id)
		}
	}
	return keep
}
