package cluster

import (
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/transport/remote"
)

// The control plane between the active controller and a worker: three
// unary calls on the worker's listener (service weir.Worker), JSON-encoded
// (wire.Codec). Every request carries the controller's term; a worker
// refuses a request whose term is below the highest it has seen (a deposed
// controller), which tells that controller to stop.

// SyncRequest is the controller's heartbeat to a worker: it carries what
// the embedded engine's board holds in memory — each computation's control
// — plus the routes of every partition's current job, and the jobs to stop.
type SyncRequest struct {
	Term uint64 `json:"term"`
	// Version is the controller's ProtocolVersion (absent: 1).
	Version  int                      `json:"version,omitempty"`
	Controls map[string]board.Control `json:"controls"`
	Routes   []remote.Route           `json:"routes"`
	// Stop lists jobs to stop now; Finish jobs to stop after their epoch
	// in flight (a move). Repeated until the worker reports them exited.
	Stop   []plan.JobID `json:"stop,omitempty"`
	Finish []plan.JobID `json:"finish,omitempty"`
	// Survey asks only for the worker's jobs in detail (SyncReply.Jobs): a
	// new leader's first call, before it decides which jobs of earlier
	// terms it adopts (adopt.go). It changes nothing on the worker but the
	// term, which from then on refuses every lower one.
	Survey bool `json:"survey,omitempty"`
	// Keep lists the jobs of earlier terms this controller adopted: a
	// worker stops every other job of an earlier term at the first Sync of
	// a new term that is not a survey (a controller without adoption sends
	// none, and so stops them all).
	Keep []plan.JobID `json:"keep,omitempty"`
}

// SyncReply is a worker's answer: its life, its jobs and their statuses.
type SyncReply struct {
	Worker string `json:"worker"`
	// Version is the worker's ProtocolVersion (absent: 1).
	Version     int    `json:"version,omitempty"`
	Incarnation uint64 `json:"incarnation"`
	// Draining: the worker is being emptied (it takes no new job).
	Draining bool `json:"draining,omitempty"`
	// Statuses are the last statuses of the worker's running jobs.
	Statuses []board.Status `json:"statuses,omitempty"`
	// Counters are the worker's cumulative counts this incarnation.
	Counters map[string]board.Counters `json:"counters,omitempty"`
	// Running lists the running jobs; Exited the jobs that exited recently,
	// with their error ("" for a clean exit).
	Running []plan.JobID          `json:"running,omitempty"`
	Exited  map[plan.JobID]string `json:"exited,omitempty"`
	// SpecHash names the spec the worker's jobs run; Jobs describes them
	// (a survey's answer only).
	SpecHash string       `json:"spec_hash,omitempty"`
	Jobs     []RunningJob `json:"jobs,omitempty"`
}

// RunningJob is a job a worker runs, as a survey reports it.
type RunningJob struct {
	ID        plan.JobID         `json:"id"`
	Comp      string             `json:"comp"`
	Partition plan.PartitionSpec `json:"partition"`
	Lease     store.LeaseID      `json:"lease"`
	// Term of the controller that started or adopted it.
	Term uint64 `json:"term"`
	// Layout is the layout the job routes its outputs by (version 3;
	// absent: the spec's partition counts).
	Layout plan.Layout `json:"layout,omitempty"`
}

// StartRequest starts a job whose lease exists already.
type StartRequest struct {
	Term uint64 `json:"term"`
	// Version is the controller's ProtocolVersion (absent: 1).
	Version int `json:"version,omitempty"`
	// SpecHash names the pipeline spec the controller runs (stored in
	// flow_state): a worker that has another one loads it first.
	SpecHash  string             `json:"spec_hash"`
	Comp      string             `json:"comp"`
	Partition plan.PartitionSpec `json:"partition"`
	JobID     plan.JobID         `json:"job_id"`
	Lease     store.LeaseID      `json:"lease"`
	Seed      uint64             `json:"seed"`
	// Layout is the partition count of every keyed computation the job
	// routes by: the controller's current layout, which a rescale changes
	// while the spec stays (version 3; absent: the spec's counts).
	Layout plan.Layout `json:"layout,omitempty"`
	// Fences: the worker's node refuses the lives of these sending
	// partitions below these leases before the job starts (a rescaled
	// computation's first jobs of a new layout: plan.JobSpec.Fences).
	Fences map[transport.PartitionID]store.LeaseID `json:"fences,omitempty"`
	// Incarnation the controller believes the worker has: a worker that
	// restarted since refuses (its new life is not what was chosen).
	Incarnation uint64 `json:"incarnation"`
}

// StartReply acknowledges a start.
type StartReply struct{}

// DrainRequest asks a worker to drain (from an operator, through the
// controller's admin API or directly).
type DrainRequest struct{}

// DrainReply acknowledges a drain.
type DrainReply struct{}
