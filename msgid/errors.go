package msgid

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// The error vocabulary of the package. All of them describe bad input from the
// caller; none is retriable, and no function of the package panics on bad input.
var (
	// ErrSyntax matches (errors.Is) every *SyntaxError: a string that is not a
	// canonical lexicographic serialization.
	ErrSyntax = errors.New("msgid: invalid lexicographic serialization")
	// ErrInvalidStream matches every *StreamError: a stream name that cannot
	// be part of an id.
	ErrInvalidStream = errors.New("msgid: invalid stream name")
	// ErrNotOrdered: the id is not exactly an ordered id (ParseOrdered, ID.Seq).
	// Inherited and merged ids are not ordered ids, even when their root is.
	ErrNotOrdered = errors.New("msgid: not an ordered id")
	// ErrNoParents: Merged was given no parent ids.
	ErrNoParents = errors.New("msgid: merged id needs at least one parent")
	// ErrEmptyID: an id argument was the empty string, which is never a
	// valid id (Flow rejects messages with an empty id).
	ErrEmptyID = errors.New("msgid: empty id")
)

// SyntaxError reports input that a parser of lexicographic serializations
// rejected, like strconv.NumError.
type SyntaxError struct {
	Func  string // the function that failed: "ParseLex", "ReadLex", "ParseLexInt64"
	Input string // the input as given
	Msg   string // what is wrong with it
}

func (e *SyntaxError) Error() string {
	return "msgid: " + e.Func + " " + quoteShort(e.Input) + ": " + e.Msg
}

// Is makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// StreamError says which byte of a stream name is not allowed, so an operator
// can fix the spec without guessing.
type StreamError struct {
	Stream string
	// Pos is the byte offset of the offending character, or -1 when the name
	// as a whole is wrong (empty).
	Pos int
}

func (e *StreamError) Error() string {
	if e.Pos < 0 || e.Pos >= len(e.Stream) {
		return "msgid: stream name " + quoteShort(e.Stream) + " is empty"
	}
	r, size := utf8.DecodeRuneInString(e.Stream[e.Pos:])
	what := strconv.QuoteRune(r)
	if r == utf8.RuneError && size <= 1 {
		what = "byte 0x" + strconv.FormatUint(uint64(e.Stream[e.Pos]), 16)
	}
	return "msgid: stream name " + quoteShort(e.Stream) + ": character " + what +
		" at byte " + strconv.Itoa(e.Pos) + " is not allowed (allowed: " + streamAlphabet + ")"
}

// Is makes errors.Is(err, ErrInvalidStream) true.
func (e *StreamError) Is(target error) bool { return target == ErrInvalidStream }

// quoteShort quotes s for an error message, eliding the middle of long inputs
// so a garbage megabyte does not end up in a log line.
func quoteShort(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max/2]) + "…" + strconv.Quote(s[len(s)-max/2:]) +
		" (" + strconv.Itoa(len(s)) + " bytes)"
}
