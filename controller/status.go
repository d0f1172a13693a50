package controller

import (
	"time"

	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// PartitionStatus describes one partition for status output.
type PartitionStatus struct {
	Partition transport.PartitionID
	Job       plan.JobID
	Lease     store.LeaseID
	Worker    string
	Restarts  int
	// LastError is why the partition's last job was removed (kept after
	// the partition recovers; ConsecutiveFailures says whether it has).
	LastError   string
	LastErrorAt *time.Time `json:",omitempty"`
	// ConsecutiveFailures counts the partition's job failures since its
	// last healthy run (0: healthy). See Config.RestartBackoff.
	ConsecutiveFailures int
	// RestartAt is when the next job may start (store clock), while the
	// partition waits out its restart backoff.
	RestartAt *time.Time `json:",omitempty"`
	// SinkFailures maps each sink whose retries ran out in the partition's
	// last failed job to its error, until a job runs healthy again.
	SinkFailures map[string]string `json:",omitempty"`
}

// Partitions lists the layout.
func (c *Controller) Partitions() []PartitionStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Store.Now()
	var out []PartitionStatus
	for _, id := range c.order {
		p := c.partitions[id]
		ps := PartitionStatus{Partition: id, Restarts: p.restarts, ConsecutiveFailures: p.failures}
		if p.lastErr != nil {
			at := p.lastErrAt
			ps.LastError, ps.LastErrorAt = p.lastErr.Error(), &at
		}
		if p.job != nil {
			ps.Job, ps.Lease, ps.Worker = p.job.id, p.job.lease, p.job.worker.ID()
		} else if now.Before(p.restartAt) {
			at := p.restartAt
			ps.RestartAt = &at
		}
		if len(p.sinkFailures) > 0 {
			ps.SinkFailures = make(map[string]string, len(p.sinkFailures))
			for k, v := range p.sinkFailures {
				ps.SinkFailures[k] = v
			}
		}
		out = append(out, ps)
	}
	return out
}

// Lease returns the lease of the job running partition p (0 if none).
func (c *Controller) Lease(p transport.PartitionID) store.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pt, ok := c.partitions[p]; ok && pt.job != nil {
		return pt.job.lease
	}
	return 0
}

// SourceStatus describes the listing of one source computation's source.
type SourceStatus struct {
	Computation string
	// Listed: a listing succeeded and the computation's partitions are
	// laid out. Until then the computation cannot run or complete.
	Listed bool
	// ConsecutiveFailures counts failed listings since the last success.
	ConsecutiveFailures int
	LastError           string     `json:",omitempty"`
	LastErrorAt         *time.Time `json:",omitempty"`
	// RetryAt is when the next listing starts, while not listed.
	RetryAt *time.Time `json:",omitempty"`
}

// Sources lists the source computations' listing states, in plan order
// (none before the first cycle).
func (c *Controller) Sources() []SourceStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SourceStatus
	for _, name := range c.plan.Order() {
		sl, ok := c.sources[name]
		if !ok {
			continue
		}
		s := SourceStatus{Computation: name, Listed: sl.listed, ConsecutiveFailures: sl.failures}
		if sl.lastErr != nil {
			at := sl.lastErrAt
			s.LastError, s.LastErrorAt = sl.lastErr.Error(), &at
		}
		if !sl.listed {
			at := sl.retryAt
			s.RetryAt = &at
		}
		out = append(out, s)
	}
	return out
}
