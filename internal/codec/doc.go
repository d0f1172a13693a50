// Package codec is weir's one byte encoding for rows, keys and message
// framing. Everything weir persists on a hot path (outbox entries, queue
// rows, state, timers) goes through it, so it is compact, deterministic and
// allocation-light, and it never panics on input it did not produce.
//
// # Rows
//
// A row is a map[string]any of named columns. AppendRow encodes one; DecodeRow
// reads it back. The value types of a row are:
//
//	nil, bool, int64, uint64, float64, string, []byte,
//	[]any and map[string]any of these (nested up to MaxDepth levels).
//
// On encode, Go int and int32 are accepted as int64, uint32 as uint64 and
// float32 as float64 (exactly: every float32 is a float64). Decoding yields
// the normalised type, so a row holding int(5) decodes to int64(5). Any other
// type (uint, int8, time.Time, pointers, typed maps and slices, ...) is an
// *UnsupportedTypeError that names the column; nothing is encoded by
// reflection, so a row's bytes depend only on the types above.
//
// Encoding is canonical: equal rows give byte-identical encodings whatever
// the insertion order of their maps, because columns (and the keys of nested
// maps) are written sorted by name, and every integer and length is a
// minimal varint. Some sinks deduplicate retried writes by a hash of their
// content, and state comparisons hash rows, so this is part of the contract.
// The value type is part of the identity: int64(1), uint64(1) and float64(1)
// encode differently. A nil []byte, []any or map[string]any encodes as the
// empty one (decoding yields a non-nil empty value); a nil interface is the
// nil value, which is different.
//
// Strings are byte sequences, as in Go: neither column names nor string
// values are checked for valid UTF-8, and both round-trip byte for byte.
// Checking would cost time on every hot path and reject data the user's own
// code produced; only the JSON bridge, whose output must be JSON, replaces
// invalid UTF-8 (with U+FFFD, as encoding/json does).
//
// The row format, version 1 (RowFormatV1):
//
//	row   = 0x01 uvarint(len(body)) body
//	body  = uvarint(n) n×(name value)          names strictly increasing
//	name  = uvarint(len) bytes
//	value = 0x00                               nil
//	      | 0x01 | 0x02                        false | true
//	      | 0x03 uvarint(zigzag(v))            int64
//	      | 0x04 uvarint(v)                    uint64
//	      | 0x05 8 bytes little-endian         float64, IEEE-754 bits as is
//	      | 0x06 uvarint(len) bytes            string
//	      | 0x07 uvarint(len) bytes            []byte
//	      | 0x08 uvarint(n) n×value            []any
//	      | 0x09 uvarint(n) n×(name value)     map[string]any, names strictly increasing
//
// The leading format byte lets the format evolve: a reader rejects a version
// it does not know with ErrUnknownFormat instead of misreading it. The length
// prefix makes a row self-delimiting, so rows can be concatenated and
// skipped without decoding. DecodeRow accepts exactly the canonical
// encodings (minimal varints, sorted unique names, body length matching the
// body), so decoding and re-encoding any accepted input reproduces its bytes.
//
// # Keys
//
// AppendKey encodes a tuple of scalar values so that bytes.Compare of two
// encodings orders them like the tuples: element by element, a shorter tuple
// before any tuple it is a prefix of. State keys, timer keys and group_by
// keys use it so that an ordered store iterates them in value order. Values
// of different types order by their type tag; see AppendKey.
//
// # Framing and hashing
//
// AppendUvarint, AppendBytes, AppendString and AppendUint64BE, with their
// readers, are the primitives other packages frame messages with. Hash64 is
// the partitioning hash; it is frozen forever.
//
// # JSON
//
// RowFromJSON and AppendRowJSON bridge rows to one-JSON-object-per-line
// formats (sources that read JSON lines, sinks that write JSONEachRow).
package codec
