// Package msgid builds and parses weir's message ids, which follow YTsaurus
// Flow's formats (flow-internals §4.2, DESIGN §6).
//
// An id names one message for its whole life: receivers deduplicate by it,
// sinks require it to grow per partition, and a replay after a crash must
// rebuild exactly the same id, or a message would be processed twice (new id)
// or never acknowledged (the distributor waits for an id nobody sends). So
// every constructor here is a pure function of its arguments: no clock, no
// randomness, no process or Go-version dependent state.
//
// Three kinds of id, all plain strings compared byte-wise:
//
//	ordered    hex16(seq) "-" stream ":" Lex(offset) [":" Lex(index)]
//	           19d8d22a8012d687-hit:17b
//	inherited  parent "-" stream ":" Lex(index)
//	           19d8d22a8012d687-hit:17b-clicks:00
//	merged     min(parents) "-" hex(digest(parents))     (a base for Inherited)
//	           19d8d22a8012d687-hit:17b-<32 hex digits>
//
// hex16 is 16 lowercase, zero-padded hex digits; Lex is the order-preserving,
// prefix-free number serialization (see Lex).
//
// Ordering contract (what the engine may rely on):
//   - Ordered ids of one stream order like (seq, offset, index), where an id
//     without an index sorts before every id with an index at the same
//     (seq, offset). hex16 is fixed-width and Lex is order-preserving and
//     prefix-free, so byte order of the strings is this tuple order.
//   - Inherited ids with the same parent and stream order like index.
//   - Ids with different streams and the same seq compare by the bytes of
//     stream+":", which is deterministic but not alphabetical stream order
//     ("hit2" < "hit" because '2' < ':'). Nothing in the engine needs more.
//
// Uniqueness contract: stream names are restricted (see ValidStream) so that
// '-' and ':' occur in an id only as separators and Lex digits are only hex.
// Then each constructor is injective over valid arguments (Merged up to a
// collision of its 128-bit digest) and the kinds cannot collide: an id can be
// split back into its parts from the right. That is what makes dedup by id
// sound.
package msgid
