package codec

import (
	"errors"
	"fmt"
)

// The error vocabulary of the package. Every error a decoder returns matches
// (errors.Is) ErrCorrupt or ErrUnknownFormat; every error an encoder returns
// matches ErrUnsupportedType, ErrTooDeep or, for JSON output, ErrNotFinite.
var (
	// ErrCorrupt: the input is not a valid encoding. Decoders return it
	// wrapped with where they were; retrying cannot help.
	ErrCorrupt = errors.New("codec: malformed input")

	// ErrTruncated: the input ended inside a value. It wraps ErrCorrupt, so
	// errors.Is(err, ErrCorrupt) holds too; a caller reading a stream may use
	// it to tell "read more bytes" from "garbage".
	ErrTruncated = fmt.Errorf("%w: truncated", ErrCorrupt)

	// ErrUnknownFormat: the row starts with a format byte this version of
	// weir does not know, most likely written by a newer weir. It is not
	// ErrCorrupt: the data may be fine, the reader is too old. Stop rather
	// than skip the row.
	ErrUnknownFormat = errors.New("codec: unknown row format")

	// ErrUnsupportedType matches every *UnsupportedTypeError.
	ErrUnsupportedType = errors.New("codec: unsupported value type")

	// ErrTooDeep: a value nests []any and map[string]any more than MaxDepth
	// levels. On encode it usually means a cycle (a map that contains
	// itself); on decode the input is corrupt, and the error matches
	// ErrCorrupt too.
	ErrTooDeep = errors.New("codec: nested deeper than MaxDepth")

	// ErrNotFinite: AppendRowJSON met a NaN or an infinity, which JSON cannot
	// represent.
	ErrNotFinite = errors.New("codec: NaN or infinity has no JSON form")
)

// UnsupportedTypeError says an encoder met a value whose Go type is not one
// of the row value types (see the package documentation).
type UnsupportedTypeError struct {
	// Column is the top-level column holding the value; empty for a key
	// element.
	Column string
	// Path locates the value inside the column in Go syntax, e.g. `[2]["x"]`,
	// empty for the column value itself. For a key element it is the
	// element's index, e.g. `[1]`.
	Path string
	// Type is the value's Go type as %T prints it.
	Type string

	key bool // the value is a key element (AppendKey), not in a row
}

func (e *UnsupportedTypeError) Error() string {
	if e.key {
		return fmt.Sprintf("codec: key element %s: unsupported type %s", e.Path, e.Type)
	}
	return fmt.Sprintf("codec: column %q%s: unsupported type %s", e.Column, e.Path, e.Type)
}

// Is makes errors.Is(err, ErrUnsupportedType) true.
func (e *UnsupportedTypeError) Is(target error) bool { return target == ErrUnsupportedType }

func unsupported(v any) *UnsupportedTypeError {
	return &UnsupportedTypeError{Type: fmt.Sprintf("%T", v)}
}

// atPath prefixes elem (e.g. `[3]`) to the location an
// *UnsupportedTypeError names, as the error travels up out of a container.
// Other errors pass unchanged: for ErrTooDeep the path would be MaxDepth
// elements of noise, the column is enough. Only the error path pays for it.
func atPath(elem string, err error) error {
	if ut, ok := err.(*UnsupportedTypeError); ok {
		ut.Path = elem + ut.Path
	}
	return err
}

// inColumn names the top-level column in an encode error.
func inColumn(col string, err error) error {
	if ut, ok := err.(*UnsupportedTypeError); ok {
		ut.Column = col
		return ut
	}
	return fmt.Errorf("codec: column %q: %w", col, err)
}
