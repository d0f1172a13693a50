package wire

import (
	"encoding"
	"encoding/json"
	"fmt"
)

// Codec is the gRPC codec of every weir service: a value with a binary
// form (encoding.BinaryMarshaler / BinaryUnmarshaler — the data plane's
// frames) is sent as it, anything else as JSON (the control plane's
// requests, whose size is a few statuses).
type Codec struct{}

// Name implements encoding.Codec.
func (Codec) Name() string { return "weir" }

// Marshal implements encoding.Codec.
func (Codec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(encoding.BinaryMarshaler); ok {
		return m.MarshalBinary()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("wire: encode %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal implements encoding.Codec.
func (Codec) Unmarshal(data []byte, v any) error {
	if m, ok := v.(encoding.BinaryUnmarshaler); ok {
		return m.UnmarshalBinary(data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("wire: decode %T: %w", v, err)
	}
	return nil
}
