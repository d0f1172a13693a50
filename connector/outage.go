package connector

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// ReachError is a write that could not reach the sink's server (connection
// refused or reset, a dial or read timeout, a connection closed without an
// answer). The sink retries it; the error only says so.
type ReachError struct {
	// Server is the endpoint the write tried (never with credentials).
	Server string
	// Attempt counts the failed attempts in a row of this sink in this
	// partition, over the job restarts of one process (see Outage).
	Attempt int
	Err     error
}

func (e *ReachError) Error() string {
	return fmt.Sprintf("cannot reach %s: %s, retrying (attempt %d)", e.Server, reachCause(e.Err), e.Attempt)
}

func (e *ReachError) Unwrap() error { return e.Err }

// reachCause is the short form of a transport error: a *net.OpError
// without the addresses the message already names ("dial: connect:
// connection refused"), so that a status line or a cut drain message
// keeps the reason.
func reachCause(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

// Outage makes a sink's failure to reach its server visible at once, by
// the path of every sink failure: a sink whose Failure returns Err while
// writes fail is reported in its partition's status (the job's
// SinkFailures), so the controller stops the job, writes the failure on
// stderr (the first at once, then summaries), lists it in 'weir pipeline
// status' (sink_failures, and the partition's last error) and restarts the
// partition with its backoff — the restart is the retry. The sink itself
// may retry as well until it is stopped; its undelivered outputs stay in
// the outbox. Recovered clears it at the first write that succeeds.
//
// The attempt count is kept per (sink, partition) for the process, so that
// it keeps counting over the restarts of the partition's job: "attempt 7"
// tells the operator how long the server has been away. Safe for
// concurrent use; a nil *Outage records nothing. Make one with NewOutage.
type Outage struct {
	key string
	mu  sync.Mutex
	err *ReachError
	// counted: the process-wide count of this key may be above zero (a
	// failure of this life, or of an earlier one not yet cleared), so
	// Recovered must clear it; otherwise Recovered — called at every
	// successful write — returns without touching the shared map.
	counted bool
}

// attempts counts the failed attempts in a row per Outage key (a sink in
// a partition); a key is deleted at its sink's next successful write.
var (
	attemptsMu sync.Mutex
	attempts   = map[string]int{}
)

// NewOutage returns the outage tracker of sc's sink in sc's partition.
func NewOutage(sc SinkContext) *Outage {
	return &Outage{key: sc.SinkID + "\x00" + sc.PartitionID, counted: true}
}

// Failed records that a write to server failed with err (a failure to
// reach it) and returns the *ReachError that Err reports from now on.
func (o *Outage) Failed(server string, err error) error {
	if o == nil {
		return &ReachError{Server: server, Attempt: 1, Err: err}
	}
	attemptsMu.Lock()
	attempts[o.key]++
	n := attempts[o.key]
	attemptsMu.Unlock()
	re := &ReachError{Server: server, Attempt: n, Err: err}
	o.mu.Lock()
	o.err, o.counted = re, true
	o.mu.Unlock()
	return re
}

// Recovered records a write that reached the server: Err is nil again and
// the attempt count restarts.
func (o *Outage) Recovered() {
	if o == nil {
		return
	}
	o.mu.Lock()
	counted := o.counted
	o.err, o.counted = nil, false
	o.mu.Unlock()
	if !counted {
		return
	}
	attemptsMu.Lock()
	delete(attempts, o.key)
	attemptsMu.Unlock()
}

// Err returns the last failure to reach the server since the last write
// that succeeded, nil if none.
func (o *Outage) Err() error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	return o.err
}
