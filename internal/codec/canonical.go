package codec

// Canonical returns row with every value in the type DecodeRow yields for
// it: int and int32 become int64, uint32 becomes uint64, float32 becomes
// float64, inside nested []any and map[string]any too. A value of a type
// rows cannot hold (uint, int8, time.Time, …) is an *UnsupportedTypeError
// naming the column and path, as AppendRow reports it — found here, where
// the row is emitted, rather than when it is stored.
//
// Why: a row lives twice, in memory as its producer built it and in the
// store as its encoding, and both must mean the same thing to everything
// downstream. The engine routes an output by the hash of its group_by key,
// and that hash treats a uint64 first column specially (a service log's
// rows are partitioned by its value); before canonical rows, an output
// holding uint32(7) went to one partition when sent from memory and to
// another when re-sent from the outbox after a crash (decoded as
// uint64(7)), and was counted twice. The job canonicalizes every row at
// the boundary (source records, outputs of user code) so that a value has
// one representation before it is hashed, stored or sent.
//
// Canonical does not allocate and returns row itself when row is already
// canonical (the usual case); otherwise it returns a copy and leaves row,
// which its producer may still hold, untouched.
func Canonical(row map[string]any) (map[string]any, error) {
	convert := false
	for _, v := range row {
		switch canonicalValue(v, 0) {
		case valueConvert:
			convert = true
		case valueUnsupported:
			_, err := AppendRow(nil, row) // the encoder's error, naming the column
			return row, err
		}
	}
	if convert {
		return canonicalize(row, -1).(map[string]any), nil
	}
	return row, nil
}

// valueKind is what canonicalValue found.
type valueKind uint8

const (
	valueCanonical   valueKind = iota // already in its decoded type
	valueConvert                      // a type Canonical converts
	valueUnsupported                  // a type rows cannot hold
)

// canonicalValue classifies v and everything nested in it (the worst
// finding wins). depth bounds the walk as MaxDepth bounds encoding (a
// cycle is left to the encoder, which refuses it).
func canonicalValue(v any, depth int) valueKind {
	switch x := v.(type) {
	case nil, bool, int64, uint64, float64, string, []byte:
		return valueCanonical
	case int, int32, uint32, float32:
		return valueConvert
	case []any:
		if depth >= MaxDepth {
			return valueCanonical
		}
		kind := valueCanonical
		for _, e := range x {
			kind = max(kind, canonicalValue(e, depth+1))
		}
		return kind
	case map[string]any:
		if depth >= MaxDepth {
			return valueCanonical
		}
		kind := valueCanonical
		for _, e := range x {
			kind = max(kind, canonicalValue(e, depth+1))
		}
		return kind
	}
	return valueUnsupported
}

// canonicalize returns v in its decoded type, copying the containers on
// the way (it runs only for a row that holds a value to convert). The row
// itself is depth -1: its columns are depth 0, as in the encoder.
func canonicalize(v any, depth int) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return uint64(x)
	case float32:
		return float64(x)
	case []any:
		if depth >= MaxDepth {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonicalize(e, depth+1)
		}
		return out
	case map[string]any:
		if depth >= MaxDepth {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = canonicalize(e, depth+1)
		}
		return out
	}
	return v
}
