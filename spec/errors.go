package spec

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Error is one problem found in a spec, located by the path of the offending key.
//
// Path joins map keys with '.' and list indexes with "[i]", for example
// "computations.MyComputation.sinks.my_sink.input_stream_ids[0]". A key that is
// not made of [A-Za-z0-9_-] is written quoted in brackets (`streams["a.b"]`) so
// that the path stays unambiguous. Path is empty for problems of the whole document
// (a syntax error, a top level that is not a map).
//
// Decoding and validation collect every problem they find and return them
// together with errors.Join, sorted by Path, so that one run shows a user
// everything to fix (up to MaxReported problems, then a *MoreError with the
// count of the rest). Use errors.As to get the first *Error, or unwrap the joined
// error (interface{ Unwrap() []error }) to get all of them.
type Error struct {
	// Path locates the problem; see the type's comment.
	Path string
	// Msg says what is wrong and what to change.
	Msg string
	// Err is the underlying cause (a time.ParseDuration error, a YSON or YAML
	// syntax error), or nil.
	Err error
}

// Error formats the problem as "path: message[: cause]".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// MaxReported is how many problems a decoding or validation error lists;
// the rest are counted in a last *MoreError. A spec with a million unknown
// keys gets a readable error, not a million lines.
const MaxReported = 20

// maxKept bounds the problems an errorList keeps in memory before it only
// counts them. Keys are visited in sorted order, so the kept ones are the
// first in path order for the decoders.
const maxKept = 1000

// MoreError ends a list of MaxReported problems when there were more.
type MoreError struct {
	// N is the number of problems not listed.
	N int
}

func (e *MoreError) Error() string {
	return fmt.Sprintf("... and %d more problems (fix those above and run again to see the rest)", e.N)
}

// errorList collects problems; err returns them sorted and joined.
type errorList struct {
	errs    []*Error
	dropped int // problems beyond maxKept, counted only
}

// add records a problem; a string argument longer than maxEcho is cut
// (cutEcho): a message echoes what the spec says, not 100 KB of it.
func (l *errorList) add(path, format string, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > maxEcho {
			args[i] = cutEcho(s)
		}
	}
	l.addErr(&Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// maxEcho bounds the bytes of a key or value an error echoes.
const maxEcho = 200

// cutEcho returns s, or its first maxEcho bytes followed by "…(N bytes)"
// when it is longer.
func cutEcho(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(s[:maxEcho], ""), len(s))
}

func (l *errorList) addErr(e *Error) {
	if len(l.errs) >= maxKept {
		l.dropped++
		return
	}
	l.errs = append(l.errs, e)
}

// err returns nil when nothing was collected, else the problems joined with
// errors.Join in a deterministic order (by path, then message), without
// duplicates, at most MaxReported of them followed by a *MoreError with the
// number left out.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool {
		if l.errs[i].Path != l.errs[j].Path {
			return l.errs[i].Path < l.errs[j].Path
		}
		return l.errs[i].Error() < l.errs[j].Error()
	})
	out := make([]error, 0, len(l.errs))
	var prev string
	for i, e := range l.errs {
		s := e.Error()
		if i > 0 && s == prev {
			continue
		}
		prev = s
		out = append(out, e)
	}
	if more := len(out) - MaxReported + l.dropped; more > 0 {
		out = append(out[:min(len(out), MaxReported)], &MoreError{N: more})
	}
	return errors.Join(out...)
}

// joinKey appends a map key to a path; a key longer than maxEcho is cut
// (cutEcho), which makes it a quoted one.
func joinKey(path, key string) string {
	key = cutEcho(key)
	if !isPathWord(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends a list index to a path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isPathWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isIDByte(c) && c != '-' {
			return false
		}
	}
	return true
}

// isIDByte reports whether c may appear in an id (stream, computation, sink,
// source or timer id): [A-Za-z0-9_].
func isIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// isID reports whether s is a valid id: non-empty and made of [A-Za-z0-9_].
// Ids are embedded in message ids, which use '-' and ':' as separators
// (DESIGN.md §6), so those characters (and anything else) are excluded.
func isID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIDByte(s[i]) {
			return false
		}
	}
	return true
}

// suggestID replaces every byte that is not allowed in an id with '_'.
func suggestID(s string) string {
	b := []byte(s)
	for i := range b {
		if !isIDByte(b[i]) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "my_id"
	}
	return string(b)
}

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to got by
// edit distance, or "" when none is close enough. Close enough means at most
// one edit per three characters of the longer name (at least one), which
// catches typos such as "processing_mod" or "cnts" without suggesting
// unrelated names.
func didYouMean(got string, candidates []string) string {
	best := ""
	for _, c := range candidates {
		d := editDistance(strings.ToLower(got), strings.ToLower(c))
		limit := max(len(got), len(c)) / 3
		if d > max(limit, 1) {
			continue
		}
		if best == "" || d < editDistance(strings.ToLower(got), strings.ToLower(best)) {
			best = c
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		// Long keys are never typos of our short names; avoid quadratic work
		// on hostile input.
		if a == b {
			return 0
		}
		return len(a) + len(b)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteList renders names as `"a", "b" and "c"` for messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}
