package weir

import (
	"time"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Row is a message payload: named columns. Column values are nil, bool,
// int64, uint64, float64, string, []byte, or nested []any and map[string]any
// of those (the types the binary codec keeps exactly).
//
// Output.Add also takes int and int32 (kept as int64), uint32 (uint64) and
// float32 (float64), and converts them when the row is emitted: downstream
// code, routing and the store see one representation per value, the same
// before and after a restart (a row re-sent from the outbox is decoded). A
// row with other types (uint, int8, time.Time, …) is refused with an
// error naming the column. The row passed to Add is not modified.
type Row = map[string]any

// Key is the grouping key of a message inside a computation: the values of
// the computation's group_by columns. Hash decides the partition (a
// partition owns a range of the uint64 hash space); Encoded is an
// order-preserving encoding of the column values and identifies the key for
// state and timers. For a source computation the key is the source
// partition's key.
type Key struct {
	Hash    uint64
	Encoded string
}

// Message is one message as user code sees it.
//
// Invariant: ID is unique within the stream and stable across replays of
// the same input (see package msgid). Messages compare by (AlignmentTimestamp,
// ID) when the engine orders them.
type Message struct {
	ID     msgid.ID
	Stream string
	Key    Key
	// SystemTimestamp is when the message entered the pipeline's accounting:
	// the epoch timestamp of the Transform that produced it, the write
	// timestamp of a source row, or inherited from the parent for Swift
	// outputs. Every message with SystemTimestamp below a stream's
	// SystemWatermark is known to be processed.
	SystemTimestamp store.Timestamp
	// AlignmentTimestamp orders messages across streams.
	AlignmentTimestamp store.Timestamp
	// EventTimestamp is the time the event happened, as the source or the
	// user code says; event-time watermarks and timers use it.
	EventTimestamp time.Time
	Payload        Row
}

// Timer is a fired timer handed to user code.
type Timer struct {
	ID               msgid.ID
	Stream           string
	Key              Key
	TriggerTimestamp time.Time
	EventTimestamp   time.Time
	SystemTimestamp  store.Timestamp
}

// TimerRequest asks for a timer on the current key. It fires once the
// watermark of its time type (event or system time, per the timer stream's
// spec) reaches Trigger; the result of processing it is committed together
// with its deletion.
type TimerRequest struct {
	Trigger time.Time
	// EventTimestamp of the timer message; zero means Trigger.
	EventTimestamp time.Time
}
