package job

import (
	"errors"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/tables"
)

// Dead letters (spec: dead_letter_stream). A computation that names a
// dead-letter stream does not stop on a poison message: the failed call is
// undone — its outputs and timers dropped, its state and external state
// writes reverted — and a row describing each of its input messages is
// emitted on the dead-letter stream instead, with the message as its
// parent. From there it is an ordinary output: committed with the epoch
// that consumes the message (so the input's dedup row or source position,
// and the dead-letter row, land together: exactly once), then delivered to
// the stream's sinks and readers.
//
// Undo is needed because a call's effects are buffered in memory until the
// epoch commits: the emitted buffer, the state cache and the external state
// buffer. Each records, while an undo log is active, what a call changes
// first, so that a failed call can be taken back without discarding the
// other calls of the epoch. Without a dead-letter stream no log is kept.

// callUndo is the undo log of one user-code call.
type callUndo struct {
	out    int // len of the emitted buffer before the call
	dirty  int // len of the state manager's dirty list before the call
	states []stateUndo
	ext    []extUndo
}

// stateUndo is a state entry as it was before the call first changed it.
type stateUndo struct {
	e        *stateEntry
	inserted bool // the call created the entry (written without a read)
	value    any
	present  bool
	empty    bool
	encode   func(any) ([]byte, error)
}

// extUndo is a buffered external state write as it was before the call
// first changed it (had false: there was none).
type extUndo struct {
	key  string
	prev *extWrite
	had  bool
}

// beginUndo starts logging the changes of one call.
func (j *Job) beginUndo(u *callUndo, outLen int) {
	*u = callUndo{out: outLen, dirty: len(j.states.dirty), states: u.states[:0], ext: u.ext[:0]}
	j.states.undo, j.ext.undo = u, u
}

// endUndo stops logging.
func (j *Job) endUndo() { j.states.undo, j.ext.undo = nil, nil }

// noteState records e before a call's first change of it.
func (u *callUndo) noteState(e *stateEntry, inserted bool) {
	for _, s := range u.states {
		if s.e == e {
			return
		}
	}
	u.states = append(u.states, stateUndo{e: e, inserted: inserted, value: e.value, present: e.present, empty: e.empty, encode: e.encode})
}

// noteExt records the buffered write of key before a call's first change.
func (u *callUndo) noteExt(key string, prev *extWrite, had bool) {
	for _, x := range u.ext {
		if x.key == key {
			return
		}
	}
	u.ext = append(u.ext, extUndo{key: key, prev: prev, had: had})
}

// rollback takes back everything the call changed and returns the emitted
// buffer cut to its length before the call.
func (j *Job) rollback(u *callUndo, out []emitted) []emitted {
	j.states.rollback(u)
	j.ext.rollback(u)
	clear(out[u.out:])
	return out[:u.out]
}

// deadLetters emits, for each message of a failed call, its dead-letter
// row on the computation's dead-letter stream, the message its parent.
func (j *Job) deadLetters(col *collector, key weir.Key, msgs []*weir.Message, cause error) {
	reason := cause.Error()
	var uce *UserCodeError
	if errors.As(cause, &uce) && uce.Err != nil {
		reason = uce.Err.Error()
		if len(uce.Stack) > 0 {
			reason += "\n\tat " + strings.Join(uce.Stack, "\n\tat ")
		}
	}
	for _, m := range msgs {
		row := weir.Row{
			"message_id":  string(m.ID),
			"stream":      m.Stream,
			"computation": j.comp.Name,
			"partition":   string(j.cfg.Partition.ID),
			"error":       reason,
			"payload":     map[string]any(m.Payload),
		}
		if off, ok := j.sourceOffset(m); ok {
			row["source"] = j.comp.SourceStream
			row["source_partition"] = j.cfg.Partition.SourceKey
			row["offset"] = int64(off)
		}
		*col.out = append(*col.out, emitted{stream: j.comp.DeadLetterStream, row: row, parents: []*weir.Message{m}, key: key})
	}
	j.deadLettered += uint64(len(msgs))
	j.cfg.Logf("job %s: %d message(s) dead-lettered on %s: %s", j.cfg.Partition.ID, len(msgs), j.comp.DeadLetterStream, firstLine(reason))
}

// firstLine is s up to its first newline, for a log line.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// runMessages runs one message call (msgs: one message, or a key batch)
// under an undo log when the computation dead-letters, and dead-letters the
// call's messages if it fails in a way that may be dead-lettered.
func (j *Job) runMessages(cc *callContext, col *collector, key weir.Key, msgs []*weir.Message, f func() error) error {
	sc := &j.calls
	if j.comp.DeadLetterStream == "" {
		return j.runUser(userCall{msgs: msgs}, col, f)
	}
	j.beginUndo(&sc.undo, len(sc.out))
	readErr, prevErr := cc.readErr, cc.err
	err := j.runUser(userCall{msgs: msgs}, col, f)
	j.endUndo()
	if err == nil && cc.err == prevErr {
		return nil
	}
	if err == nil {
		// The code ignored a failed state or external state call: the
		// call fails with it (process reports cc.err after the key).
		err = j.userCodeError(userCall{msgs: msgs}, nil, nil, cc.err)
	}
	if cc.readErr != readErr {
		return err // weir's failure (a read of state), not the message's
	}
	sc.out = j.rollback(&sc.undo, sc.out)
	cc.err = prevErr // the failed call's errors are dead-lettered with it
	j.deadLetters(col, key, msgs, err)
	return nil
}

// skipIdentity names m for a skip record (tables.SourceIdentity for a
// source record, whose id changes at every retry; its id otherwise).
func (j *Job) skipIdentity(m *weir.Message) string {
	if off, ok := j.sourceOffset(m); ok {
		return tables.SourceIdentity(j.cfg.Partition.SourceKey, uint64(off))
	}
	return tables.MessageIdentity(m.ID)
}

// dropSkipped removes from msgs the messages an operator skipped: each is
// consumed without user code seeing it, and becomes a dead letter if the
// computation has a dead-letter stream. (They stay among the epoch's fresh
// inputs: their dedup rows and the source position commit as for any.)
func (j *Job) dropSkipped(msgs []*weir.Message) []*weir.Message {
	kept := msgs[:0]
	for _, m := range msgs {
		rec, ok := j.skips[j.skipIdentity(m)]
		if !ok {
			kept = append(kept, m)
			continue
		}
		reason := "skipped by the operator ('weir pipeline skip')"
		if rec.Reason != "" {
			reason += ": " + rec.Reason
		}
		if j.comp.DeadLetterStream != "" {
			j.deadLetters(&j.calls.col, m.Key, []*weir.Message{m}, errors.New(reason))
		} else {
			j.cfg.Logf("job %s: message %s %s", j.cfg.Partition.ID, m.ID, reason)
		}
	}
	clear(msgs[len(kept):])
	return kept
}
