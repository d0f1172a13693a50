package runtime

import (
	"fmt"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// recordVersion is the first byte of every persisted message record.
const recordVersion = 1

// appendMessage encodes everything of m except its id (which is the row key)
// and its key (outputs have none; receivers compute their own).
func appendMessage(dst []byte, m *weir.Message) ([]byte, error) {
	dst = append(dst, recordVersion)
	dst = codec.AppendString(dst, m.Stream)
	dst = codec.AppendUvarint(dst, uint64(m.SystemTimestamp))
	dst = codec.AppendUvarint(dst, uint64(m.AlignmentTimestamp))
	dst = codec.AppendUvarint(dst, unixNano(m.EventTimestamp))
	return codec.AppendRow(dst, m.Payload)
}

func decodeMessage(id msgid.ID, b []byte) (*weir.Message, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, fmt.Errorf("message %s: unknown record version", id)
	}
	r := reader{b: b[1:]}
	m := &weir.Message{ID: id, Stream: r.str()}
	m.SystemTimestamp = store.Timestamp(r.uvarint())
	m.AlignmentTimestamp = store.Timestamp(r.uvarint())
	m.EventTimestamp = fromUnixNano(r.uvarint())
	m.Payload = r.row()
	if r.err != nil {
		return nil, fmt.Errorf("message %s: %w", id, r.err)
	}
	return m, nil
}

// reader decodes a record field by field; the first error sticks and every
// later read returns a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	var s string
	s, r.b, r.err = codec.String(r.b)
	return s
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	v, r.b, r.err = codec.Uvarint(r.b)
	return v
}

func (r *reader) row() weir.Row {
	if r.err != nil {
		return nil
	}
	var row weir.Row
	row, r.b, r.err = codec.DecodeRow(r.b)
	return row
}

// unixNano maps the zero time to 0 so that "no event time" round-trips.
func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func fromUnixNano(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// messageSize estimates a message's in-memory footprint for buffer limits.
func messageSize(m *weir.Message) int {
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
