package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// safeWriter is the stderr every log line and error of the weir command
// goes through (Options.defaults wraps Options.Stderr in one). Messages
// carry text anyone who can write a row controls — column names, values,
// queue names — and a terminal obeys the control characters in them: an
// ESC sequence clears the screen or retitles the window, a carriage return
// or a newline forges a line weir never wrote ("pipeline completed … 0
// failed"). So, for each Write (one log record or one printed error):
//
//   - every control character except newline and tab — C0, DEL, the C1
//     range U+0080–U+009F, and the Unicode bidirectional overrides and
//     isolates that reorder what follows — is written as a Go escape: ESC
//     as \x1b, a carriage return as \r, U+202E as \u202e;
//   - a newline inside the record is kept (errors and warnings span lines)
//     but the line after it is indented by two spaces unless it already
//     starts with a space or a tab: every line that starts at the left
//     margin is the start of a record weir wrote, and no row can make one.
//
// Printable text, including non-ASCII letters, passes unchanged; bytes
// that are not valid UTF-8 pass unchanged too (a rune split across two
// writes must not be mangled, and an invalid byte moves no cursor).
type safeWriter struct {
	w io.Writer
}

// Write writes p escaped; it reports len(p) when the escaped text was
// written whole.
func (s safeWriter) Write(p []byte) (int, error) {
	out := appendSafe(make([]byte, 0, len(p)+16), p)
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// appendSafe appends p to dst escaped as safeWriter describes.
func appendSafe(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == '\n':
			dst = append(dst, '\n')
			if rest := p[i+1:]; len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' {
				dst = append(dst, ' ', ' ')
			}
		case r == '\t':
			dst = append(dst, '\t')
		case r == utf8.RuneError && size == 1:
			dst = append(dst, p[i])
		case r == '\r':
			dst = append(dst, `\r`...)
		case r < 0x20 || r == 0x7f:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, p[i:i+size]...)
		}
		i += size
	}
	return dst
}

// isBidiControl reports the Unicode characters that reorder the text after
// them (the "Trojan Source" characters): a name could make a line read
// backwards.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// maxEcho bounds what an error echoes of a value the user passed: a
// 100 KB name must not become a 100 KB error.
const maxEcho = 200

// echo returns s for an error message, quoted, cut to maxEcho bytes ("…
// (N bytes)" says how long it was).
func echo(s string) string {
	if len(s) <= maxEcho {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", strings.ToValidUTF8(s[:maxEcho], ""), len(s))
}

// echoArgs echoes arguments, at most three of them.
func echoArgs(args []string) string {
	var parts []string
	for i, a := range args {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(args)-3))
			break
		}
		parts = append(parts, echo(a))
	}
	return strings.Join(parts, " ")
}
