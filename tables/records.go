package tables

import (
	"fmt"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// RecordVersion is the first byte of every persisted message record.
const RecordVersion = 1

// AppendMessage encodes everything of m except its id (which is the row key)
// and its key (outputs have none; receivers compute their own).
func AppendMessage(dst []byte, m *weir.Message) ([]byte, error) {
	dst = append(dst, RecordVersion)
	dst = codec.AppendString(dst, m.Stream)
	dst = codec.AppendUvarint(dst, uint64(m.SystemTimestamp))
	dst = codec.AppendUvarint(dst, uint64(m.AlignmentTimestamp))
	dst = codec.AppendUvarint(dst, UnixNano(m.EventTimestamp))
	return codec.AppendRow(dst, m.Payload)
}

func DecodeMessage(id msgid.ID, b []byte) (*weir.Message, error) {
	if len(b) == 0 || b[0] != RecordVersion {
		return nil, fmt.Errorf("message %s: unknown record version", id)
	}
	r := Reader{B: b[1:]}
	m := &weir.Message{ID: id, Stream: r.Str()}
	m.SystemTimestamp = store.Timestamp(r.Uvarint())
	m.AlignmentTimestamp = store.Timestamp(r.Uvarint())
	m.EventTimestamp = FromUnixNano(r.Uvarint())
	m.Payload = r.Row()
	if r.Err != nil {
		return nil, fmt.Errorf("message %s: %w", id, r.Err)
	}
	return m, nil
}

// Reader decodes a record field by field; the first error sticks and every
// later read returns a zero value.
type Reader struct {
	B   []byte
	Err error
}

func (r *Reader) Str() string {
	if r.Err != nil {
		return ""
	}
	var s string
	s, r.B, r.Err = codec.String(r.B)
	return s
}

func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	var v uint64
	v, r.B, r.Err = codec.Uvarint(r.B)
	return v
}

func (r *Reader) Row() weir.Row {
	if r.Err != nil {
		return nil
	}
	var row weir.Row
	row, r.B, r.Err = codec.DecodeRow(r.B)
	return row
}

// UnixNano maps the zero time to 0 so that "no event time" round-trips.
func UnixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func FromUnixNano(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// SizeOr is size when it is known (positive: a source's or a sender's own
// count), else MessageSize(m): one walk of a decoded row is spared
// wherever a size travels with the message.
func SizeOr(size int, m *weir.Message) int {
	if size > 0 {
		return size
	}
	return MessageSize(m)
}

// MessageSize estimates a message's in-memory footprint for buffer limits.
func MessageSize(m *weir.Message) int {
	n := len(m.ID) + len(m.Stream) + 48
	for k, v := range m.Payload {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 16
	case []byte:
		return len(x) + 24
	case []any:
		n := 24
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case map[string]any:
		n := 48
		for k, e := range x {
			n += len(k) + valueSize(e)
		}
		return n
	default:
		return 16
	}
}
