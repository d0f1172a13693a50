package codec

// Canonical returns row with every value in the type DecodeRow yields for
// it: int and int32 become int64, uint32 becomes uint64, float32 becomes
// float64, inside nested []any and map[string]any too. Other values,
// including unsupported types (which the encoder refuses, naming the
// column), are kept as they are.
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
func Canonical(row map[string]any) map[string]any {
	for _, v := range row {
		if !canonicalValue(v, 0) {
			return canonicalize(row, -1).(map[string]any)
		}
	}
	return row
}

// canonicalValue reports whether v and everything nested in it already has
// its decoded type. depth bounds the walk as MaxDepth bounds encoding (a
// cycle is reported as canonical here and refused by the encoder).
func canonicalValue(v any, depth int) bool {
	switch x := v.(type) {
	case int, int32, uint32, float32:
		return false
	case []any:
		if depth >= MaxDepth {
			return true
		}
		for _, e := range x {
			if !canonicalValue(e, depth+1) {
				return false
			}
		}
	case map[string]any:
		if depth >= MaxDepth {
			return true
		}
		for _, e := range x {
			if !canonicalValue(e, depth+1) {
				return false
			}
		}
	}
	return true
}

// canonicalize returns v in its decoded type, copying containers that hold
// a value to convert. The row itself is depth -1: its columns are depth 0,
// as in canonicalValue and the encoder.
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
		if canonicalValue(x, depth) {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonicalize(e, depth+1)
		}
		return out
	case map[string]any:
		if canonicalValue(x, depth) {
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
