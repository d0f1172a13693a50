package job

import (
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/transport"
)

// Transport is what a job needs of the transport: offer its outputs as its
// partition's sender, and attach to its partition's buffer as the receiver.
// The embedded engine passes the in-process *transport.Hub; the distributed
// mode passes a per-job endpoint of a worker's network node
// (transport/remote), which keeps the same contract (package transport).
type Transport interface {
	transport.Sender
	// RegisterSender makes the caller the sender of partition p once its
	// lease is proven; offers under earlier tokens of p are fenced from then
	// on (transport.SenderToken). ordered is the sender's promise that its
	// channels are ordered (transport.Delivery).
	RegisterSender(p transport.PartitionID, ordered bool) transport.SenderToken
	// Attach starts a new attachment of partition p as its receiver.
	Attach(p transport.PartitionID) transport.Receiver
}

// Board is what a job needs of the status/control exchange: the embedded
// engine passes the controller's *board.Board; a remote worker passes its
// own board, which its heartbeats carry to and from the controller.
type Board interface {
	// Control returns the control of computation comp.
	Control(comp string) board.Control
	// Post records the job's status (dropped unless the job owns its
	// partition).
	Post(s board.Status)
	// AddCounters adds an epoch's counts to a computation's totals.
	AddCounters(comp string, d board.Counters)
	// ControlChanged returns a channel closed when comp's control next
	// changes its UpstreamDone or Draining (an idle job waits on it).
	ControlChanged(comp string) <-chan struct{}
}

var (
	_ Transport = (*transport.Hub)(nil)
	_ Board     = (*board.Board)(nil)
)
