package job

import (
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
)

// report posts the job's status for the controller.
func (j *Job) report(idle bool) {
	s := board.Status{
		Partition:   j.cfg.Partition.ID,
		Computation: j.comp.Name,
		Job:         j.cfg.JobID,
		Epoch:       j.lastTS,
		At:          j.st.Now(),
		SystemWM:    map[string]store.Timestamp{},
		Totals:      j.totals,
		LastEpoch:   j.lastEpoch,
	}
	ctl := j.cfg.Board.Control(j.comp.Name)
	s.UpstreamDoneSeen = ctl.UpstreamDone
	s.AppliedInputWM = make(map[string]store.Timestamp, len(j.inputs.watermarks))
	for k, v := range j.inputs.watermarks {
		s.AppliedInputWM[k] = v
	}
	var mins map[string]store.Timestamp
	if j.swift != nil {
		mins = j.swift.minSystemTimestamp()
	} else {
		mins = j.box.minSystemTimestamp()
	}
	for _, stream := range j.comp.Outputs {
		// Future outputs of a Transform carry a later epoch timestamp; a Swift
		// output inherits its parent's, bounded by the input watermark (or, at
		// a source, by the next record's write time).
		bound := j.lastTS
		if j.comp.Swift() {
			bound = j.swiftBound()
		}
		if m, ok := mins[stream]; ok && m < bound {
			bound = m
		}
		s.SystemWM[stream] = bound
	}
	if j.src != nil {
		s.EventWM, s.EventIdle = j.src.eventWatermark(j.st.Now())
	} else {
		s.EventWM = j.eventWM
	}
	undelivered, _ := j.box.undelivered()
	// emptied: everything the job emitted is delivered — delivered outputs
	// whose erase is not yet committed count as in flight (a pipeline
	// reported stopped must not send them again), and so do outputs an
	// at-most-once sink acknowledged (they left the outbox) but has not
	// written yet (connector.Queueing): a stop, the completion or a
	// rescale waits for them.
	emptied := undelivered == 0 && j.waitingOffers() == 0 && len(j.box.erase) == 0 &&
		(j.swift == nil || j.swift.count() == 0) && !j.sinksQueued()
	quiet := emptied
	if j.src != nil {
		quiet = quiet && j.src.inflight == 0
	} else {
		quiet = quiet && j.recv.Pending() == 0
	}
	s.Quiet, s.DrainingSeen = quiet, ctl.Draining
	// Quiesced: what the job took before the control said Quiesce is
	// delivered; input buffered since may wait (it is not fetched).
	s.Quiesced = j.quiesced && ctl.Quiesce && emptied && !j.sinksPending()
	drained := quiet && j.timers.count() == 0
	if j.src != nil {
		drained = drained && j.src.finished()
	} else {
		drained = drained && ctl.UpstreamDone
	}
	s.Drained = drained
	for _, sk := range j.sinks {
		if f, ok := sk.sink.(interface{ Failure() error }); ok {
			if err := f.Failure(); err != nil {
				if s.SinkFailures == nil {
					s.SinkFailures = map[string]string{}
				}
				s.SinkFailures[sk.plan.ID] = err.Error()
			}
		}
	}
	j.cfg.Board.Post(s)
}

// sinksQueued reports whether a sink holds acknowledged outputs not yet
// written (connector.Queueing).
func (j *Job) sinksQueued() bool {
	for _, sk := range j.sinks {
		if q, ok := sk.sink.(connector.Queueing); ok && q.Queued() > 0 {
			return true
		}
	}
	return false
}

// swiftBound is a lower bound of the SystemTimestamp of any future output of
// a Swift job: outputs inherit their parents', and every future input has a
// SystemTimestamp at or above the input watermark.
func (j *Job) swiftBound() store.Timestamp {
	if j.src != nil {
		return j.src.nextSystemTimestamp()
	}
	return j.minInputWatermark()
}

// minInputWatermark is the lowest SystemWatermark of the job's input
// streams: every input below it is processed.
func (j *Job) minInputWatermark() store.Timestamp {
	var wm store.Timestamp
	for i, s := range j.comp.Inputs {
		if w := j.inputs.watermarks[s]; i == 0 || w < wm {
			wm = w
		}
	}
	return wm
}

// Inspection is a snapshot of a job's in-memory bookkeeping, for status
// pages, protocol scripts and tests.
type Inspection struct {
	// CachedStates and CachedStateBytes: the state cache (bounded by the
	// computation's state_cache_byte_size_limit).
	CachedStates, CachedStateBytes int
	// Timers: active timers. Undelivered: outputs in the outbox (or, for a
	// Swift job, inputs held until their outputs are delivered).
	Timers, Undelivered int
	// WaitingOffers: outputs waiting for room in a downstream buffer.
	WaitingOffers int
}

// Inspect returns the job's bookkeeping. It must run on the job's
// goroutine (between epochs).
func (j *Job) Inspect() Inspection {
	n, b := j.states.cached()
	in := Inspection{CachedStates: n, CachedStateBytes: b, Timers: j.timers.count(), WaitingOffers: j.waitingOffers()}
	in.Undelivered, _ = j.box.undelivered()
	if j.swift != nil {
		in.Undelivered += j.swift.count()
	}
	return in
}
