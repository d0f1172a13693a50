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
// (surrounding whitespace allowed), into a row. JSON numbers become:
//
//   - int64 if written as an integer (no fraction, no exponent) that fits;
//   - uint64 if written as an integer above the int64 range that fits;
//   - float64 otherwise (1.0, 1e3, and integers too large for both; those
//     lose precision, which is what any JSON reader without big numbers does).
//
// The literal, not the value, decides: 1.0 stays a float64 so that a float
// column does not turn into an int64 column for rows that happen to hold
// whole numbers (AppendRowJSON writes float64(1) as 1.0 for the same
// reason). Numbers beyond the float64 range are an error.
//
// Strings stay strings (JSON cannot say "bytes": base64 from AppendRowJSON
// comes back as a string), arrays become []any, objects map[string]any; of
// duplicate names the last wins, as in encoding/json. Objects and arrays may
// nest MaxDepth levels inside a column, like any row.
//
// Errors: input that is not one JSON object (invalid JSON, an array, a
// scalar, trailing data) wraps ErrCorrupt; too deep nesting wraps ErrTooDeep.
func RowFromJSON(line []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("codec: json: %w: %w", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("codec: json: data after the object: %w", ErrCorrupt)
	}
	row, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("codec: json: %s is not a JSON object: %w", jsonKind(v), ErrCorrupt)
	}
	for name, v := range row {
		nv, err := fromJSONValue(v, 0)
		if err != nil {
			return nil, fmt.Errorf("codec: json: column %q: %w", name, err)
		}
		row[name] = nv
	}
	return row, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// fromJSONValue replaces the json.Numbers in v, in place for containers.
func fromJSONValue(v any, depth int) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return fromJSONNumber(string(x))
	case []any:
		if depth >= MaxDepth {
			return nil, ErrTooDeep
		}
		for i, e := range x {
			ne, err := fromJSONValue(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			x[i] = ne
		}
	case map[string]any:
		if depth >= MaxDepth {
			return nil, ErrTooDeep
		}
		for k, e := range x {
			ne, err := fromJSONValue(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			x[k] = ne
		}
	}
	return v, nil
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
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w: %w", s, ErrCorrupt, err)
	}
	return f, nil
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
