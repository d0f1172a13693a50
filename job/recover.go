package job

import (
	"fmt"
	goruntime "runtime"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
)

// User code runs on the job's goroutine. Whatever goes wrong in one call —
// an error it returns, a panic it raises, an invalid output it tried to
// emit — fails the job with a *UserCodeError: nothing of the epoch is
// committed, the controller restarts the partition with backoff, and the
// error names the input that caused it, so that a poison message can be
// found (and fixed, or skipped by the user's code). A panic no longer kills
// the process and every other partition with it.
//
// Panics that are weir's own invariant violations (internal/invariants) are
// not recovered: they are bugs in weir, and must still crash the test that
// provoked them.

// UserCodeError is a failure of one user-code call.
type UserCodeError struct {
	Computation string
	Partition   transport.PartitionID
	// Call is what the code was called for: "message", "key batch" or "timer".
	Call string
	// Messages are the ids of the call's input messages (in call order).
	Messages []msgid.ID
	// Timer is the id of the fired timer of a timer call.
	Timer msgid.ID
	// Source (the source stream), SourcePartition and Offsets locate the
	// input of a source computation in its source (Offsets index-aligned
	// with Messages).
	Source          string
	SourcePartition string
	Offsets         []connector.Offset
	// Panic is the value the code panicked with (nil: it returned Err).
	Panic any
	// Stack holds the frames of the panicking code, innermost first.
	Stack []string
	// Err is the error the code returned or emitted, or one describing the
	// panic.
	Err error
}

func (e *UserCodeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "computation %s, partition %s, ", e.Computation, e.Partition)
	switch {
	case e.Call == "timer":
		fmt.Fprintf(&b, "timer %s", e.Timer)
	case len(e.Messages) == 1:
		fmt.Fprintf(&b, "message %s", e.Messages[0])
	default:
		fmt.Fprintf(&b, "key batch of %d messages %s … %s", len(e.Messages), e.Messages[0], e.Messages[len(e.Messages)-1])
	}
	switch n := len(e.Offsets); {
	case n == 1:
		fmt.Fprintf(&b, " (source %s, partition %s, offset %d)", e.Source, e.SourcePartition, e.Offsets[0])
	case n > 1:
		fmt.Fprintf(&b, " (source %s, partition %s, offsets %d … %d)", e.Source, e.SourcePartition, e.Offsets[0], e.Offsets[n-1])
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	for _, f := range e.Stack {
		b.WriteString("\n\tat ")
		b.WriteString(f)
	}
	if hint := e.skipHint(); hint != "" {
		if len(e.Stack) > 0 {
			b.WriteString("\n\t(")
		} else {
			b.WriteString(" (")
		}
		b.WriteString(hint)
		b.WriteString(")")
	}
	return b.String()
}

func (e *UserCodeError) Unwrap() error { return e.Err }

// skipHint is the command that skips the failed message: for the operator
// of a partition that fails on it again and again. None for a timer or a
// key batch (skip its messages one by one).
func (e *UserCodeError) skipHint() string {
	switch {
	case e.Call != "message" || len(e.Messages) != 1:
		return ""
	case len(e.Offsets) == 1:
		return fmt.Sprintf("to skip it: weir pipeline skip --computation %s --source-partition %s --offset %d", e.Computation, e.SourcePartition, e.Offsets[0])
	default:
		return fmt.Sprintf("to skip it: weir pipeline skip --computation %s --message %s", e.Computation, e.Messages[0])
	}
}

// userCall is one call of user code: its input messages, or its timer.
type userCall struct {
	msgs  []*weir.Message
	timer *weir.Timer
}

// runUser runs one user-code call: f calls the code and returns its
// error. A returned error, a recovered panic, or an output the collector
// refused (even if the code dropped that error: the output would be lost
// silently) becomes a *UserCodeError naming the call's input.
func (j *Job) runUser(call userCall, col *collector, f func() error) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if isInvariantViolation(r) {
			panic(r) // a bug in weir, not in the user's code
		}
		err = j.userCodeError(call, r, userStack(), fmt.Errorf("panic: %v", r))
	}()
	if err := f(); err != nil {
		return j.userCodeError(call, nil, nil, err)
	}
	if col.err != nil {
		return j.userCodeError(call, nil, nil, col.err)
	}
	return nil
}

func (j *Job) userCodeError(call userCall, panicValue any, stack []string, err error) *UserCodeError {
	e := &UserCodeError{Computation: j.comp.Name, Partition: j.cfg.Partition.ID, Call: "message",
		Panic: panicValue, Stack: stack, Err: err}
	if call.timer != nil {
		e.Call, e.Timer = "timer", call.timer.ID
		return e
	}
	if len(call.msgs) > 1 {
		e.Call = "key batch"
	}
	for _, m := range call.msgs {
		e.Messages = append(e.Messages, m.ID)
	}
	for _, m := range call.msgs {
		off, ok := j.sourceOffset(m)
		if !ok {
			e.Offsets = nil
			break
		}
		e.Offsets = append(e.Offsets, off)
	}
	if len(e.Offsets) > 0 {
		e.Source, e.SourcePartition = j.comp.SourceStream, j.cfg.Partition.SourceKey
	}
	return e
}

// sourceOffset returns the offset of m in the job's source partition, if m
// is a record this source job read: its id is Ordered(seq, stream, offset)
// (an id inherited from one, or any message of a job without a source, is
// not).
func (j *Job) sourceOffset(m *weir.Message) (connector.Offset, bool) {
	if j.src == nil {
		return 0, false
	}
	p, err := msgid.ParseOrdered(m.ID)
	if err != nil {
		return 0, false
	}
	return connector.Offset(p.Offset), true
}

// invariantPrefix starts the panic message of internal/invariants.Check
// (TestInvariantPanicsAreNotRecovered keeps the two in step).
const invariantPrefix = "weir invariant violated: "

func isInvariantViolation(r any) bool {
	s, ok := r.(string)
	return ok && strings.HasPrefix(s, invariantPrefix)
}

// jobMethodPrefix starts the function names of Job's methods and their
// closures: the frames below user code.
const jobMethodPrefix = "github.com/weir-stream/weir/job.(*Job)."

// maxStackFrames bounds the frames a UserCodeError keeps.
const maxStackFrames = 8

// userStack returns the frames of the code that panicked, innermost first:
// called from runUser's deferred function, it skips the Go runtime's panic
// machinery and stops at the job's own frames (process, runUser).
func userStack() []string {
	pcs := make([]uintptr, 64)
	n := goruntime.Callers(3, pcs) // skip Callers, userStack, the deferred function
	frames := goruntime.CallersFrames(pcs[:n])
	var out []string
	started := false
	for {
		f, more := frames.Next()
		switch {
		case strings.HasPrefix(f.Function, jobMethodPrefix):
			return out
		case !started && strings.HasPrefix(f.Function, "runtime."):
			// gopanic, panicIndex, sigpanic: the panic machinery.
		case len(out) < maxStackFrames:
			started = true
			out = append(out, fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line))
		}
		if !more {
			return out
		}
	}
}
