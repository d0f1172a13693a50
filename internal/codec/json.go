package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RowFromJSON decodes line, which must hold exactly one JSON object
// (surrounding whitespace allowed), into a row. It never changes a value
// silently: what it cannot keep exactly is an error naming the column.
// JSON numbers become:
//
//   - int64 if written as an integer (no fraction, no exponent) that fits;
//   - uint64 if written as an integer above the int64 range that fits;
//   - float64 if written with a fraction or an exponent (1.0, 1e3).
//
// An integer literal outside both 64-bit ranges (2^64, -2^63-1) is an
// error rather than a rounded float: write it as a string, or as a float
// literal if rounding is acceptable. The literal, not the value, decides:
// 1.0 stays a float64 so that a float column does not turn into an int64
// column for rows that happen to hold whole numbers (AppendRowJSON writes
// float64(1) as 1.0 for the same reason). Numbers beyond the float64 range
// are an error.
//
// Strings stay strings (JSON cannot say "bytes": base64 from AppendRowJSON
// comes back as a string), arrays become []any, objects map[string]any.
// Objects and arrays may nest MaxDepth levels inside a column, like any row.
// Errors, rather than the silent repairs of encoding/json: invalid UTF-8
// (the error gives its byte position, counted from 1), a \u escape of a lone UTF-16
// surrogate (neither can be kept as text), and a name repeated within one
// object (encoding/json keeps the last).
//
// Errors: input that is not one JSON object (invalid JSON, an array, a
// scalar, trailing data) or one of the cases above wraps ErrCorrupt; too
// deep nesting wraps ErrTooDeep.
func RowFromJSON(line []byte) (map[string]any, error) {
	if !utf8.Valid(line) {
		off := 0
		for off < len(line) {
			r, size := utf8.DecodeRune(line[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, fmt.Errorf("codec: json: invalid UTF-8 at byte %d (JSON text must be UTF-8; write binary data as a base64 string): %w", off+1, ErrCorrupt)
	}
	if err := checkSurrogates(line); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("codec: json: %w: %w", ErrCorrupt, err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("codec: json: %s is not a JSON object: %w", jsonKind(tok), ErrCorrupt)
	}
	row, err := jsonObject(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("codec: json: data after the object: %w", ErrCorrupt)
	}
	return row, nil
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		return "an array"
	}
	return fmt.Sprintf("%T", tok)
}

// jsonError wraps err with the location path (`column "a"` then `["b"][2]`).
func jsonError(path string, err error) error {
	if path == "" {
		return fmt.Errorf("codec: json: %w", err)
	}
	return fmt.Errorf("codec: json: %s: %w", path, err)
}

// jsonMember appends an object member to path (the top level names a
// column).
func jsonMember(path, name string) string {
	if path == "" {
		return fmt.Sprintf("column %q", name)
	}
	return path + "[" + strconv.Quote(name) + "]"
}

// jsonObject reads the members of an object whose '{' was consumed.
func jsonObject(dec *json.Decoder, path string, depth int) (map[string]any, error) {
	m := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(path, fmt.Errorf("%w: %w", ErrCorrupt, err))
		}
		name, ok := tok.(string)
		if !ok {
			return nil, jsonError(path, fmt.Errorf("object member name is not a string: %w", ErrCorrupt))
		}
		mp := jsonMember(path, name)
		if _, dup := m[name]; dup {
			if path == "" {
				return nil, fmt.Errorf("codec: json: column %q appears twice in the object; keep one: %w", name, ErrCorrupt)
			}
			return nil, jsonError(path, fmt.Errorf("name %q appears twice in one object; keep one: %w", name, ErrCorrupt))
		}
		v, err := jsonValue(dec, mp, depth)
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, jsonError(path, fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	return m, nil
}

// jsonValue reads one value at path; depth counts the containers around it
// inside its column.
func jsonValue(dec *json.Decoder, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(path, fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	switch x := tok.(type) {
	case json.Number:
		v, err := fromJSONNumber(string(x))
		if err != nil {
			return nil, jsonError(path, err)
		}
		return v, nil
	case json.Delim:
		if depth >= MaxDepth {
			return nil, jsonError(path, ErrTooDeep)
		}
		if x == '{' {
			return jsonObject(dec, path, depth+1)
		}
		l := []any{}
		for i := 0; dec.More(); i++ {
			v, err := jsonValue(dec, path+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, jsonError(path, fmt.Errorf("%w: %w", ErrCorrupt, err))
		}
		return l, nil
	}
	return tok, nil // nil, bool, string
}

// fromJSONNumber converts a JSON number literal (already validated by the
// JSON decoder) as RowFromJSON documents.
func fromJSONNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if s[0] != '-' {
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u, nil
			}
		}
		return nil, fmt.Errorf("integer %s is outside the 64-bit range (%d..%d) and cannot be kept exactly; "+
			"write it as a string (or as a float literal such as %se0 if rounding is acceptable): %w",
			s, int64(math.MinInt64), uint64(math.MaxUint64), s, ErrCorrupt)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w: %w", s, ErrCorrupt, err)
	}
	return f, nil
}

// checkSurrogates rejects a \u escape of a lone UTF-16 surrogate inside a
// JSON string of line (encoding/json would turn it into U+FFFD). Malformed
// escapes are left to the JSON decoder.
func checkSurrogates(line []byte) error {
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !in {
			in = c == '"'
			continue
		}
		switch c {
		case '"':
			in = false
		case '\\':
			if i+6 > len(line) || line[i+1] != 'u' {
				i++ // the escaped character
				continue
			}
			r := hex4(line[i+2 : i+6])
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if i+12 <= len(line) && line[i+6] == '\\' && line[i+7] == 'u' {
					if lo := hex4(line[i+8 : i+12]); lo >= 0xDC00 && lo < 0xE000 {
						i += 11
						continue
					}
				}
				fallthrough
			case r >= 0xDC00 && r < 0xE000:
				return fmt.Errorf("codec: json: %s at byte %d is half of a UTF-16 surrogate pair, not a character (it cannot be kept as text): %w", line[i:i+6], i+1, ErrCorrupt)
			}
			i += 5
		}
	}
	return nil
}

// hex4 decodes 4 hex digits, or returns -1.
func hex4(b []byte) int {
	n := 0
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return n
}

// AppendRowJSON appends row as one JSON object, without a trailing newline,
// and returns the extended slice. The output is deterministic: names of the
// row and of nested maps are sorted, so equal rows give equal bytes.
//
// Values are written as encoding/json writes them (with SetEscapeHTML(false):
// sinks are not web pages, and <, > and & stay themselves), except floats
// that would print as integers: float64(1) is written 1.0 so that
// RowFromJSON reads it back as a float64. []byte is a base64 (standard
// encoding, padded) string, as in encoding/json. Invalid UTF-8 in names or
// strings becomes U+FFFD, as in encoding/json; this is the one place where
// codec does not keep bytes as they are, because the output must be JSON.
//
// It accepts the value types AppendRow accepts. Errors: an
// *UnsupportedTypeError, or ErrTooDeep, or ErrNotFinite for NaN and
// infinities, which JSON cannot write; each names the column. On error dst
// is returned cut back to its original length.
func AppendRowJSON(dst []byte, row map[string]any) ([]byte, error) {
	start := len(dst)
	dst, err := appendJSONObject(dst, row, 0, true)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func appendJSONObject(dst []byte, m map[string]any, depth int, top bool) ([]byte, error) {
	dst = append(dst, '{')
	var buf [sortBufLen]entry
	for i, e := range sortEntries(buf[:0], m) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, e.name), ':')
		var err error
		if dst, err = appendJSONValue(dst, e.v, depth); err != nil {
			if top {
				return dst, inColumn(e.name, err)
			}
			return dst, atPath("["+strconv.Quote(e.name)+"]", err)
		}
	}
	return append(dst, '}'), nil
}

func appendJSONValue(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case float64:
		return appendJSONFloat(dst, x)
	case float32:
		return appendJSONFloat(dst, float64(x))
	case string:
		return appendJSONString(dst, x), nil
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"'), nil
	case []any:
		if depth >= MaxDepth {
			return dst, ErrTooDeep
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONValue(dst, e, depth+1); err != nil {
				return dst, atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		if depth >= MaxDepth {
			return dst, ErrTooDeep
		}
		return appendJSONObject(dst, x, depth+1, false)
	default:
		return dst, unsupported(v)
	}
}

// appendJSONFloat writes f as encoding/json does (shortest representation
// that reads back exactly; exponent form outside [1e-6, 1e21)), plus ".0"
// when that would look like an integer.
func appendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%v: %w", f, ErrNotFinite)
	}
	start := len(dst)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-09 to e-9, as encoding/json does.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst, nil
	}
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string the way encoding/json does with
// HTML escaping off: ", \ and control characters escaped (the short forms
// \b \f \n \r \t where they exist), invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 escaped because JavaScript treats them as line ends.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
