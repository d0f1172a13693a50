package msgid

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// ID is a message id. Ids compare as strings (==, <, strings.Compare); the
// package doc states which orders that comparison gives. The zero value "" is
// not a valid id.
type ID string

// hex16Len is the width of the seq part of an ordered id.
const hex16Len = 16

// appendHex16 appends v as 16 lowercase, zero-padded hex digits. Fixed width
// is what makes string order of ordered ids follow seq order.
func appendHex16(dst []byte, v uint64) []byte {
	var b [hex16Len]byte
	for i := hex16Len - 1; i >= 0; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return append(dst, b[:]...)
}

// idBufLen is the stack buffer used by the string-returning constructors; ids
// that fit cost exactly one allocation (the string itself).
const idBufLen = 128

// AppendOrdered appends Ordered(seq, stream, offset) to dst and returns the
// extended buffer. With enough capacity in dst it does not allocate, which is
// why the engine's hot path (one id per output message) should use it with a
// reused buffer.
//
// REQUIRES: ValidStream(stream) == nil. It is not checked here because it is
// per-message work for a per-spec fact: the engine validates stream names once
// when it loads the spec. An invalid stream yields an id that may collide with
// another or fail ParseOrdered; it does not panic.
func AppendOrdered(dst []byte, seq uint64, stream string, offset uint64) []byte {
	dst = slices.Grow(dst, hex16Len+2+len(stream)+lexMaxLen)
	dst = appendHex16(dst, seq)
	dst = append(dst, '-')
	dst = append(dst, stream...)
	dst = append(dst, ':')
	return AppendLex(dst, offset)
}

// Ordered returns the ordered id hex16(seq) + "-" + stream + ":" + Lex(offset)
// (Flow's GenerateOrderedMessageId). seq is a unique sequence number taken
// from the store (per epoch for Transform outputs; memorized per source offset
// for source messages, so a replay rebuilds the same id); offset is the source
// offset or the index of the output within the epoch.
//
// Ids of one stream order like (seq, offset). REQUIRES as AppendOrdered.
func Ordered(seq uint64, stream string, offset uint64) ID {
	var b [idBufLen]byte
	return ID(AppendOrdered(b[:0], seq, stream, offset))
}

// AppendOrderedIndexed appends OrderedIndexed(seq, stream, offset, index) to
// dst and returns the extended buffer. REQUIRES as AppendOrdered.
func AppendOrderedIndexed(dst []byte, seq uint64, stream string, offset, index uint64) []byte {
	dst = slices.Grow(dst, hex16Len+3+len(stream)+2*lexMaxLen)
	dst = AppendOrdered(dst, seq, stream, offset)
	dst = append(dst, ':')
	return AppendLex(dst, index)
}

// OrderedIndexed returns Ordered(seq, stream, offset) + ":" + Lex(index): the
// id of the index-th message cut from the source record at offset (Flow's
// secondary offset). Ids of one stream order like (seq, offset, index); an id
// without index sorts before all ids with an index at the same offset, but a
// source should use one form or the other for a stream, never both.
// REQUIRES as AppendOrdered.
func OrderedIndexed(seq uint64, stream string, offset, index uint64) ID {
	var b [idBufLen]byte
	return ID(AppendOrderedIndexed(b[:0], seq, stream, offset, index))
}

// AppendInherited appends Inherited(parent, stream, index) to dst and returns
// the extended buffer. REQUIRES: parent is a valid id and
// ValidStream(stream) == nil (not checked, see AppendOrdered).
func AppendInherited(dst []byte, parent ID, stream string, index uint64) []byte {
	dst = slices.Grow(dst, len(parent)+2+len(stream)+lexMaxLen)
	dst = append(dst, parent...)
	dst = append(dst, '-')
	dst = append(dst, stream...)
	dst = append(dst, ':')
	return AppendLex(dst, index)
}

// Inherited returns parent + "-" + stream + ":" + Lex(index) (Flow's
// GenerateInheritedMessageId): the id of the index-th message a deterministic
// (Swift) computation emits into stream for one parent. It depends only on
// the parent's id, so a replay of the parent yields the same children.
// Children of one parent in one stream order like index.
// REQUIRES as AppendInherited.
func Inherited(parent ID, stream string, index uint64) ID {
	// Parents grow with every Swift hop, so size the result exactly instead
	// of betting on a stack buffer: one allocation whatever the length.
	var lex [lexMaxLen]byte
	l := AppendLex(lex[:0], index)
	var b strings.Builder
	b.Grow(len(parent) + 2 + len(stream) + len(l))
	b.WriteString(string(parent))
	b.WriteByte('-')
	b.WriteString(stream)
	b.WriteByte(':')
	b.Write(l)
	return ID(b.String())
}

// mergedDomain separates the merged-id digest from any other use of SHA-256
// over id lists, and versions the format: changing the digest must change
// this string, because it changes every merged id (and breaks dedup of
// in-flight messages across an upgrade).
const mergedDomain = "weir/msgid/merged/v1\x00"

// mergedDigestLen is the number of digest bytes kept (128 bits, printed as
// 32 hex digits): a collision among the batches of one pipeline is not a
// practical concern at that width.
const mergedDigestLen = 16

// Merged returns the base id of an output that has several parents, which
// happens when a Swift computation batches with
// allow_batching_with_relaxed_guarantees. The output's id is then
// Inherited(base, stream, index).
//
// The base is the smallest parent id + "-" + 32 lowercase hex digits of
// SHA-256 (truncated to 128 bits) over the parent ids. It is a pure function
// of the parent *set*: the parents are sorted and duplicates dropped before
// hashing, so the same batch replayed in another arrival order, or with a
// parent redelivered twice, yields the same id — a replay that produced a new
// id would leave the parents unacknowledged forever. Each id is hashed with a
// length prefix, so different lists cannot run together into the same bytes.
// The digest is fixed by the algorithm (crypto/sha256, no seed, no map
// iteration), so it is stable across processes, machines and Go versions.
//
// With one distinct parent the base is that parent itself, so a batch of one
// gets exactly the id the non-batched path gives (Inherited(parent, ...)), as
// in Flow's single-parent fast path.
//
// Difference from Flow: Flow chains CityHash128WithSeed over the parents in
// the order given (flow-internals §4.3). That makes the id depend on batch
// order, and CityHash is not in Go's standard library; weir's merged ids are
// therefore not byte-compatible with Flow's, which no one needs. (Some later
// Flow sources instead give a merged output an ordered id from the epoch seq;
// weir follows DESIGN §5, min parent + digest, which needs no seq.)
//
// Ordering: a merged base sorts after its smallest parent (it extends it), so
// merged ids do not preserve per-key order between batches; that is the
// relaxation the option's name admits.
//
// Errors: ErrNoParents for an empty list, ErrEmptyID (wrapped with the
// position) if a parent is "". parents is not modified.
func Merged(parents []ID) (ID, error) {
	if len(parents) == 0 {
		return "", ErrNoParents
	}
	for i, p := range parents {
		if p == "" {
			return "", &parentError{index: i}
		}
	}
	if len(parents) == 1 {
		return parents[0], nil
	}
	sorted := slices.Clone(parents)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) == 1 {
		return sorted[0], nil
	}

	h := sha256.New()
	h.Write([]byte(mergedDomain))
	var lenBuf [binary.MaxVarintLen64]byte
	for _, p := range sorted {
		h.Write(binary.AppendUvarint(lenBuf[:0], uint64(len(p))))
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])

	var b strings.Builder
	b.Grow(len(sorted[0]) + 1 + 2*mergedDigestLen)
	b.WriteString(string(sorted[0]))
	b.WriteByte('-')
	var hx [2 * mergedDigestLen]byte
	hex.Encode(hx[:], sum[:mergedDigestLen])
	b.Write(hx[:])
	return ID(b.String()), nil
}

// parentError is ErrEmptyID with the position of the offending parent.
type parentError struct{ index int }

func (e *parentError) Error() string {
	return "msgid: Merged: parent " + strconv.Itoa(e.index) + " is the empty id"
}

func (e *parentError) Unwrap() error { return ErrEmptyID }

// streamAlphabet describes the bytes ValidStream allows, for error messages.
const streamAlphabet = "A-Z a-z 0-9 _ ."

// streamByteOK reports whether c may appear in a stream name.
func streamByteOK(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.'
}

// ValidStream reports whether name can be used as the stream part of an id.
// A valid name is non-empty and consists only of ASCII letters, digits, '_'
// and '.'. The error is a *StreamError (matching ErrInvalidStream) naming
// the first offending character and its byte offset.
//
// Why so strict: '-' and ':' are the separators of the id formats, so a
// stream containing them would make ids ambiguous — Inherited(p, "a-b", 0)
// and Inherited(p+"-a", "b", 0) are the same string — and ambiguity means two
// different messages could share an id and one would be dropped by dedup.
// An allow-list (rather than a deny-list of the two separators) also keeps
// whitespace, control bytes and non-ASCII out of storage keys and logs.
// Widening the alphabet later is compatible; narrowing it would not be.
func ValidStream(name string) error {
	if name == "" {
		return &StreamError{Stream: name, Pos: -1}
	}
	for i := 0; i < len(name); i++ {
		if !streamByteOK(name[i]) {
			return &StreamError{Stream: name, Pos: i}
		}
	}
	return nil
}

// OrderedParts are the fields of an ordered id.
type OrderedParts struct {
	Seq      uint64
	Stream   string
	Offset   uint64
	Index    uint64 // meaningful only when HasIndex
	HasIndex bool   // the id was built by OrderedIndexed
}

// ParseOrdered splits an ordered id into its fields. It accepts exactly the
// ids Ordered and OrderedIndexed build from a valid stream name, so
// rebuilding from the parts gives back id byte for byte. Anything else —
// inherited or merged ids (even when their root is ordered), uppercase hex,
// non-canonical numbers, invalid stream names — is an error matching
// ErrNotOrdered. It never panics.
func ParseOrdered(id ID) (OrderedParts, error) {
	s := string(id)
	fail := func(why string) (OrderedParts, error) {
		return OrderedParts{}, &notOrderedError{id: s, why: why}
	}
	if len(s) < hex16Len+1 {
		return fail("too short")
	}
	var p OrderedParts
	for i := 0; i < hex16Len; i++ {
		d := hexVal(s[i])
		if d < 0 {
			return fail("seq is not 16 lowercase hex digits")
		}
		p.Seq = p.Seq<<4 | uint64(d)
	}
	if s[hex16Len] != '-' {
		return fail("no '-' after the 16-digit seq")
	}
	rest := s[hex16Len+1:]
	colon := strings.IndexByte(rest, ':')
	if colon < 0 {
		return fail("no ':' after the stream")
	}
	p.Stream = rest[:colon]
	if err := ValidStream(p.Stream); err != nil {
		return fail(err.Error())
	}
	v, rest, err := readLex(rest[colon+1:], false)
	if err != nil {
		return fail("offset: " + err.Error())
	}
	p.Offset = v
	if rest == "" {
		return p, nil
	}
	if rest[0] != ':' {
		return fail("unexpected bytes after the offset")
	}
	v, rest, err = readLex(rest[1:], false)
	if err != nil {
		return fail("index: " + err.Error())
	}
	if rest != "" {
		return fail("unexpected bytes after the index")
	}
	p.Index, p.HasIndex = v, true
	return p, nil
}

// Seq returns the seq of an ordered id: the unique sequence number of the
// epoch (or memorized source batch) that created it. Errors as ParseOrdered.
func (id ID) Seq() (uint64, error) {
	p, err := ParseOrdered(id)
	if err != nil {
		return 0, err
	}
	return p.Seq, nil
}

// notOrderedError is ErrNotOrdered with the id and the reason.
type notOrderedError struct{ id, why string }

func (e *notOrderedError) Error() string {
	return "msgid: " + quoteShort(e.id) + " is not an ordered id: " + e.why
}

func (e *notOrderedError) Unwrap() error { return ErrNotOrdered }
