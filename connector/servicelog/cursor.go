package servicelog

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
)

// cursor is a partition's read position: where the scan of its current
// cycle stands.
//
// Invariant: offset() is the offset of the next record the partition
// emits; it increases with every record and with every cycle change, so
// the job's position (an offset) moves whenever the cursor does.
type cursor struct {
	// Cycle is the current cycle, from 0.
	Cycle uint32
	// After is the key encoding of the last row emitted in this cycle (nil:
	// none yet, the scan starts at the partition's first key).
	After []byte
	// Rows counts the records emitted in this cycle.
	Rows uint32
	// Started is when this cycle's scan started (store clock, unix
	// nanoseconds; 0: not yet), PrevStarted when the previous cycle's did.
	Started, PrevStarted int64
	// Done: a finite partition has completed its one cycle.
	Done bool
}

// offset packs (Cycle, Rows): the cycle in the high 32 bits.
func (c cursor) offset() connector.Offset {
	return connector.Offset(uint64(c.Cycle)<<32 | uint64(c.Rows))
}

// maxRowsPerCycle bounds the records one partition emits in one cycle.
const maxRowsPerCycle = 1<<32 - 2

const cursorVersion = 1

func (c cursor) encode() []byte {
	b := []byte{cursorVersion}
	b = codec.AppendUvarint(b, uint64(c.Cycle))
	b = codec.AppendBytes(b, c.After)
	b = codec.AppendUvarint(b, uint64(c.Rows))
	b = codec.AppendUvarint(b, uint64(c.Started))
	b = codec.AppendUvarint(b, uint64(c.PrevStarted))
	done := uint64(0)
	if c.Done {
		done = 1
	}
	return codec.AppendUvarint(b, done)
}

func decodeCursor(b []byte) (cursor, error) {
	var c cursor
	if len(b) == 0 || b[0] != cursorVersion {
		return c, errors.New("unknown service log cursor version")
	}
	b = b[1:]
	var err error
	var v uint64
	var after []byte
	next := func() uint64 {
		if err != nil {
			return 0
		}
		v, b, err = codec.Uvarint(b)
		return v
	}
	c.Cycle = uint32(next())
	if err == nil {
		after, b, err = codec.Bytes(b)
		if len(after) > 0 {
			c.After = append([]byte(nil), after...)
		}
	}
	c.Rows = uint32(next())
	c.Started = int64(next())
	c.PrevStarted = int64(next())
	c.Done = next() == 1
	if err != nil {
		return cursor{}, fmt.Errorf("service log cursor: %w", err)
	}
	return c, nil
}
