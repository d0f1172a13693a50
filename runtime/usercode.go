package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
)

// callContext implements weir.Context for one user-code call.
type callContext struct {
	ctx     context.Context
	job     *Job
	key     weir.Key
	now     store.Timestamp
	eventWM time.Time
	err     error // first state error, reported after the call
}

func (c *callContext) Context() context.Context  { return c.ctx }
func (c *callContext) Key() weir.Key             { return c.key }
func (c *callContext) Now() store.Timestamp      { return c.now }
func (c *callContext) EventWatermark() time.Time { return c.eventWM }
func (c *callContext) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}
func (c *callContext) LoadState(name string, decode func([]byte) (any, error)) (any, error) {
	if err := c.stateAllowed(name); err != nil {
		return nil, err
	}
	v, err := c.job.states.load(c.ctx, c.key, name, decode)
	c.setErr(err)
	return v, err
}
func (c *callContext) StoreState(name string, v any, empty bool, encode func(any) ([]byte, error)) {
	if c.stateAllowed(name) != nil {
		return
	}
	c.job.states.store(c.key, name, v, empty, encode)
}

// stateAllowed refuses state in Swift computations. A Swift computation's
// inputs are deduplicated only by the SystemWatermark, not by message id: an
// input processed and committed, whose acknowledgement was then lost (a
// crash after the commit), is delivered and processed again — its outputs
// are recomputed with the same ids and deduplicated downstream, but a state
// update would be applied twice. Stateful code belongs in a Transform.
func (c *callContext) stateAllowed(name string) error {
	if !c.job.comp.Swift() {
		return nil
	}
	err := fmt.Errorf("weir: computation %s is a SwiftMap and may not use state (%q): a redelivered input would update it twice; use a Transform for stateful code", c.job.comp.Name, name)
	c.setErr(err)
	return err
}

// emitted is an output or timer requested by user code, before the engine
// assigns its id and meta.
type emitted struct {
	stream  string
	row     weir.Row
	parents []*weir.Message
	timer   *weir.Timer // parent timer, when the call processes a timer
	key     weir.Key
	// timer requests
	isTimer bool
	req     weir.TimerRequest
}

// collector implements weir.Output for one call.
type collector struct {
	job      *Job
	key      weir.Key
	defaults []*weir.Message
	timer    *weir.Timer
	allowed  map[*weir.Message]bool
	out      []emitted
	// err is the first output the collector refused: the call fails with
	// it even if the code ignored the error (runUser).
	err error
}

// refuse records the first refused output and returns err.
func (c *collector) refuse(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

func (c *collector) Add(stream string, row weir.Row) error {
	return c.add(stream, row, c.defaults)
}

func (c *collector) AddWithParents(stream string, row weir.Row, parents ...*weir.Message) error {
	for _, p := range parents {
		if !c.allowed[p] {
			return c.refuse(fmt.Errorf("weir: output on %s names a parent that is not a message of the current call", stream))
		}
	}
	return c.add(stream, row, parents)
}

func (c *collector) add(stream string, row weir.Row, parents []*weir.Message) error {
	if !c.job.outputs[stream] {
		return c.refuse(fmt.Errorf("weir: computation %s has no output stream %q (output_stream_ids: %v)", c.job.comp.Name, stream, c.job.comp.Outputs))
	}
	if c.job.comp.Swift() {
		if c.timer != nil {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: outputs may not depend on timers", c.job.comp.Name))
		}
		if len(parents) == 0 {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: output on %s has no parent message", c.job.comp.Name, stream))
		}
		if len(parents) > 1 && !c.job.comp.AllowBatching {
			return c.refuse(fmt.Errorf("weir: SwiftMap %s: output message has %d parents; merging requires allow_batching_with_relaxed_guarantees=true", c.job.comp.Name, len(parents)))
		}
	}
	c.out = append(c.out, emitted{stream: stream, row: row, parents: parents, timer: c.timer, key: c.key})
	return nil
}

func (c *collector) AddTimer(stream string, req weir.TimerRequest) error {
	if _, ok := c.job.comp.Timers[stream]; !ok {
		return c.refuse(fmt.Errorf("weir: computation %s has no timer stream %q", c.job.comp.Name, stream))
	}
	if c.job.comp.IsSource() {
		return c.refuse(fmt.Errorf("weir: computation %s reads a source and cannot use timers", c.job.comp.Name))
	}
	if req.Trigger.IsZero() {
		return c.refuse(fmt.Errorf("weir: timer on %s has no trigger time", stream))
	}
	c.out = append(c.out, emitted{stream: stream, isTimer: true, req: req, key: c.key, parents: c.defaults, timer: c.timer})
	return nil
}

func (c *collector) Streams() []string { return c.job.comp.Outputs }
