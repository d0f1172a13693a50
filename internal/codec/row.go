package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// RowFormatV1 is the leading byte of every row AppendRow writes (see the
// package documentation for the layout). A new layout gets a new byte;
// readers keep decoding every byte they ever knew, because rows outlive the
// binaries that wrote them (state, outbox).
const RowFormatV1 byte = 0x01

// MaxDepth is how deeply []any and map[string]any may nest inside one column
// value: a column holding a list of maps is depth 2. Encoders refuse deeper
// values (almost always a cycle, which would otherwise recurse until the
// stack overflows), and decoders refuse them as corrupt, so that a hostile
// input cannot exhaust the stack either.
const MaxDepth = 64

// Value tags of the row format. Invariant: never renumber a tag; add new ones.
const (
	tagNil    byte = 0x00
	tagFalse  byte = 0x01
	tagTrue   byte = 0x02
	tagInt64  byte = 0x03
	tagUint64 byte = 0x04
	tagFloat  byte = 0x05
	tagString byte = 0x06
	tagBytes  byte = 0x07
	tagList   byte = 0x08
	tagMap    byte = 0x09
)

// AppendRow appends the canonical encoding of row to dst and returns the
// extended slice. Equal rows (same names, same value types, same values)
// give identical bytes whatever order their maps were filled in. A nil row
// encodes as the empty row.
//
// On error dst is returned cut back to its original length (bytes in its
// spare capacity may have been overwritten) and the error is an
// *UnsupportedTypeError naming the column, or wraps ErrTooDeep.
//
// With a reused dst of sufficient capacity AppendRow does not allocate for
// rows of up to 16 columns whose nested maps also have at most 16 keys
// (sorting the names of a larger map takes one allocation).
func AppendRow(dst []byte, row map[string]any) ([]byte, error) {
	start := len(dst)
	// The body length is not known until the body is written. Reserve one
	// byte for it, enough for bodies under 128 bytes, and move the body up
	// in the rare case the length needs more: one memmove is cheaper than a
	// sizing pass over every value.
	dst = append(dst, RowFormatV1, 0)
	bodyStart := len(dst)
	dst, err := appendEntries(dst, row, 0, true)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - bodyStart
	if n < 0x80 {
		dst[bodyStart-1] = byte(n)
		return dst, nil
	}
	k := uvarintLen(uint64(n))
	dst = append(dst, make([]byte, k-1)...)
	copy(dst[bodyStart+k-1:], dst[bodyStart:bodyStart+n])
	binary.PutUvarint(dst[bodyStart-1:], uint64(n))
	return dst, nil
}

// entry is one column (or nested map key) while its map is being sorted.
type entry struct {
	name string
	v    any
}

// sortBufLen is how many entries a map may have before sorting its names
// allocates. 16 entries take 512 bytes of stack per nesting level.
const sortBufLen = 16

// sortEntries appends the entries of m to es, which should be empty, and
// sorts them by name. It allocates only if es has too little capacity.
func sortEntries(es []entry, m map[string]any) []entry {
	if cap(es) < len(m) {
		es = make([]entry, 0, len(m))
	}
	for k, v := range m {
		es = append(es, entry{k, v})
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return es
}

// appendEntries writes the count and the entries of m sorted by name. top
// says m is the row itself, so errors name the column rather than a path.
func appendEntries(dst []byte, m map[string]any, depth int, top bool) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	var buf [sortBufLen]entry
	for _, e := range sortEntries(buf[:0], m) {
		dst = AppendString(dst, e.name)
		var err error
		if dst, err = appendValue(dst, e.v, depth); err != nil {
			if top {
				return dst, inColumn(e.name, err)
			}
			return dst, atPath("["+strconv.Quote(e.name)+"]", err)
		}
	}
	return dst, nil
}

// appendValue writes one tagged value; depth is how many containers enclose
// it within its column.
func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, tagNil), nil
	case bool:
		if x {
			return append(dst, tagTrue), nil
		}
		return append(dst, tagFalse), nil
	case int64:
		return appendInt64(dst, x), nil
	case int:
		return appendInt64(dst, int64(x)), nil
	case int32:
		return appendInt64(dst, int64(x)), nil
	case uint64:
		return binary.AppendUvarint(append(dst, tagUint64), x), nil
	case uint32:
		return binary.AppendUvarint(append(dst, tagUint64), uint64(x)), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(x)), nil
	case float32:
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(float64(x))), nil
	case string:
		return AppendString(append(dst, tagString), x), nil
	case []byte:
		return AppendBytes(append(dst, tagBytes), x), nil
	case []any:
		if depth >= MaxDepth {
			return dst, ErrTooDeep
		}
		dst = binary.AppendUvarint(append(dst, tagList), uint64(len(x)))
		for i, e := range x {
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		return dst, nil
	case map[string]any:
		if depth >= MaxDepth {
			return dst, ErrTooDeep
		}
		return appendEntries(append(dst, tagMap), x, depth+1, false)
	default:
		return dst, unsupported(v)
	}
}

func appendInt64(dst []byte, v int64) []byte {
	return binary.AppendUvarint(append(dst, tagInt64), uint64(v<<1)^uint64(v>>63))
}

// DecodeRow reads one row written by AppendRow from the front of b and
// returns it with the bytes after it.
//
// Every input either decodes or returns an error (never a panic): errors
// wrap ErrCorrupt (ErrTruncated if b ends inside the row) or
// ErrUnknownFormat. Only canonical encodings are accepted (see the package
// documentation), so re-encoding a decoded row reproduces the bytes read.
//
// The row does not alias b: b may be reused at once. Decoding checks the
// whole row before allocating anything, so a corrupt length or count never
// makes it allocate more than the input's size; then it allocates the map,
// one buffer shared by all strings and names of the row, one shared by all
// []byte values, and the interface boxes the values need. Because of the
// shared buffers, keeping any one string or []byte of a row keeps all of
// that row's string (or []byte) bytes reachable; copy a value out of a large
// row if it must outlive the rest. The []byte values are cut to their own
// capacity, so appending to one never overwrites another.
func DecodeRow(b []byte) (row map[string]any, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("codec: row: empty input: %w", ErrTruncated)
	}
	if b[0] != RowFormatV1 {
		return nil, nil, fmt.Errorf("codec: row: format byte 0x%02x: %w", b[0], ErrUnknownFormat)
	}
	body, rest, err := takeBytes(b[1:])
	if err != nil {
		return nil, nil, fmt.Errorf("codec: row: body length: %w", err)
	}
	var sz arenaSizes
	left, err := scanEntries(body, 0, &sz)
	if err != nil {
		return nil, nil, fmt.Errorf("codec: row: %w", err)
	}
	if len(left) != 0 {
		return nil, nil, fmt.Errorf("codec: row: %d bytes after the last column: %w", len(left), ErrCorrupt)
	}
	var d rowDecoder
	d.strs.Grow(sz.strs)
	if sz.bytes > 0 {
		d.bytes = make([]byte, 0, sz.bytes)
	}
	row, _ = d.entries(body)
	return row, rest, nil
}

// arenaSizes is what the checking pass of DecodeRow learns for the
// allocating pass: how many bytes all strings and all []byte values take.
type arenaSizes struct {
	strs, bytes int
}

// scanEntries checks a count and that many name-value pairs with names
// strictly increasing, without allocating, and returns the input after them.
func scanEntries(b []byte, depth int, sz *arenaSizes) ([]byte, error) {
	n, b, err := takeUvarint(b)
	if err != nil {
		return nil, fmt.Errorf("entry count: %w", err)
	}
	// Each entry takes at least 2 bytes (an empty name and a nil tag).
	if n > uint64(len(b))/2 {
		return nil, fmt.Errorf("%d entries in %d bytes: %w", n, len(b), ErrTruncated)
	}
	var prev []byte
	for i := range n {
		var name []byte
		if name, b, err = takeBytes(b); err != nil {
			return nil, fmt.Errorf("entry %d: name: %w", i, err)
		}
		if i > 0 && bytes.Compare(prev, name) >= 0 {
			return nil, fmt.Errorf("entry %d: name %q not after %q: %w", i, name, prev, ErrCorrupt)
		}
		prev = name
		sz.strs += len(name)
		if b, err = scanValue(b, depth, sz); err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
	}
	return b, nil
}

// scanValue checks one tagged value, like scanEntries.
func scanValue(b []byte, depth int, sz *arenaSizes) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("value tag: %w", ErrTruncated)
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagNil, tagFalse, tagTrue:
		return b, nil
	case tagInt64, tagUint64:
		_, b, err := takeUvarint(b)
		if err != nil {
			return nil, fmt.Errorf("integer: %w", err)
		}
		return b, nil
	case tagFloat:
		if len(b) < 8 {
			return nil, fmt.Errorf("float64: %w", ErrTruncated)
		}
		return b[8:], nil
	case tagString, tagBytes:
		v, b, err := takeBytes(b)
		if err != nil {
			return nil, fmt.Errorf("string or bytes: %w", err)
		}
		if tag == tagString {
			sz.strs += len(v)
		} else {
			sz.bytes += len(v)
		}
		return b, nil
	case tagList:
		if depth >= MaxDepth {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, ErrTooDeep)
		}
		n, b, err := takeUvarint(b)
		if err != nil {
			return nil, fmt.Errorf("list length: %w", err)
		}
		if n > uint64(len(b)) { // each element takes at least its tag
			return nil, fmt.Errorf("%d list elements in %d bytes: %w", n, len(b), ErrTruncated)
		}
		for i := range n {
			if b, err = scanValue(b, depth+1, sz); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return b, nil
	case tagMap:
		if depth >= MaxDepth {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, ErrTooDeep)
		}
		return scanEntries(b, depth+1, sz)
	default:
		return nil, fmt.Errorf("value tag 0x%02x: %w", tag, ErrCorrupt)
	}
}

// rowDecoder is the allocating pass of DecodeRow. It runs only on input the
// checking pass accepted, so it reads without checks beyond what keeps it
// from panicking, and ignores the (impossible) errors.
//
// Invariant: strs has room for every string of the row (Grow in DecodeRow),
// so substrings taken from it stay in one allocation. Were it to grow anyway
// the strings would still be right, just in more allocations.
type rowDecoder struct {
	strs  strings.Builder
	bytes []byte
}

// str copies p into the string arena and returns it as a string.
func (d *rowDecoder) str(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	d.strs.Write(p)
	s := d.strs.String()
	return s[len(s)-len(p):]
}

// byteSlice copies p into the []byte arena; the result is never nil.
func (d *rowDecoder) byteSlice(p []byte) []byte {
	if len(p) == 0 {
		return []byte{}
	}
	off := len(d.bytes)
	d.bytes = append(d.bytes, p...)
	return d.bytes[off:len(d.bytes):len(d.bytes)]
}

func (d *rowDecoder) entries(b []byte) (map[string]any, []byte) {
	n, b, _ := takeUvarint(b)
	m := make(map[string]any, n)
	for range n {
		var name []byte
		var v any
		name, b, _ = takeBytes(b)
		v, b = d.value(b)
		m[d.str(name)] = v
	}
	return m, b
}

func (d *rowDecoder) value(b []byte) (any, []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagFalse:
		return false, b
	case tagTrue:
		return true, b
	case tagInt64:
		u, b, _ := takeUvarint(b)
		return int64(u>>1) ^ -int64(u&1), b
	case tagUint64:
		u, b, _ := takeUvarint(b)
		return u, b
	case tagFloat:
		if len(b) < 8 {
			return nil, nil
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
	case tagString:
		v, b, _ := takeBytes(b)
		return d.str(v), b
	case tagBytes:
		v, b, _ := takeBytes(b)
		return d.byteSlice(v), b
	case tagList:
		n, b, _ := takeUvarint(b)
		if n > uint64(len(b)) {
			return nil, nil
		}
		l := make([]any, n)
		for i := range l {
			l[i], b = d.value(b)
		}
		return l, b
	case tagMap:
		return d.entries(b)
	default: // tagNil; other tags were rejected by scanValue
		return nil, b
	}
}
