package clickhouse

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weir-stream/weir"
)

// kind is the value kind of a column type, after Nullable and
// LowCardinality are unwrapped.
type kind int

const (
	kindInt kind = iota
	kindUint
	kindFloat
	kindString
	kindFixedString
	kindDate
	kindDateTime
	kindText // DateTime64, UUID, Enum*, IPv4/6: written as given text
	kindDecimal
	kindBool
	kindArray
)

// colType is a parsed ClickHouse column type.
type colType struct {
	raw      string
	kind     kind
	bits     int // Int/UInt/Float width
	size     int // FixedString(N)
	nullable bool
	elem     *colType // Array element
}

// parseType parses the types the sink can write; anything else is an error
// naming the type (Map, Tuple, Nested, AggregateFunction, …).
func parseType(t string) (*colType, error) {
	ct := &colType{raw: t}
	s := t
	for {
		switch {
		case strings.HasPrefix(s, "LowCardinality(") && strings.HasSuffix(s, ")"):
			s = s[len("LowCardinality(") : len(s)-1]
			continue
		case strings.HasPrefix(s, "Nullable(") && strings.HasSuffix(s, ")"):
			s = s[len("Nullable(") : len(s)-1]
			ct.nullable = true
			continue
		}
		break
	}
	switch {
	case strings.HasPrefix(s, "Array(") && strings.HasSuffix(s, ")"):
		e, err := parseType(s[len("Array(") : len(s)-1])
		if err != nil {
			return nil, err
		}
		ct.kind, ct.elem = kindArray, e
	case strings.HasPrefix(s, "UInt"):
		n, err := strconv.Atoi(s[4:])
		if err != nil || (n != 8 && n != 16 && n != 32 && n != 64) {
			return nil, fmt.Errorf("unsupported column type %s", t)
		}
		ct.kind, ct.bits = kindUint, n
	case strings.HasPrefix(s, "Int"):
		n, err := strconv.Atoi(s[3:])
		if err != nil || (n != 8 && n != 16 && n != 32 && n != 64) {
			return nil, fmt.Errorf("unsupported column type %s", t)
		}
		ct.kind, ct.bits = kindInt, n
	case s == "Float32":
		ct.kind, ct.bits = kindFloat, 32
	case s == "Float64":
		ct.kind, ct.bits = kindFloat, 64
	case s == "String":
		ct.kind = kindString
	case strings.HasPrefix(s, "FixedString(") && strings.HasSuffix(s, ")"):
		n, err := strconv.Atoi(s[len("FixedString(") : len(s)-1])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("unsupported column type %s", t)
		}
		ct.kind, ct.size = kindFixedString, n
	case s == "Date" || s == "Date32":
		ct.kind = kindDate
	case s == "DateTime" || strings.HasPrefix(s, "DateTime("):
		ct.kind = kindDateTime
	case strings.HasPrefix(s, "DateTime64("), s == "UUID", s == "IPv4", s == "IPv6",
		strings.HasPrefix(s, "Enum8("), strings.HasPrefix(s, "Enum16("):
		ct.kind = kindText
	case strings.HasPrefix(s, "Decimal"):
		ct.kind = kindDecimal
	case s == "Bool":
		ct.kind = kindBool
	default:
		return nil, fmt.Errorf("unsupported column type %s (the sink writes numbers, strings, dates, enums, UUIDs, decimals, Bool, Nullable and Array of those)", t)
	}
	return ct, nil
}

// column is one column the INSERT names.
type column struct {
	name string
	typ  *colType
	// messageID: the sink fills it with the message id.
	messageID bool
}

// rowEncoder writes messages as rows of one format for a fixed column list.
// Its output is a pure function of the messages: the same batch always
// encodes to the same bytes (an exactly-once replay depends on it).
type rowEncoder struct {
	format string
	cols   []column
	index  map[string]int
}

func newRowEncoder(format string, cols []column) *rowEncoder {
	e := &rowEncoder{format: format, cols: cols, index: map[string]int{}}
	for i, c := range cols {
		e.index[c.name] = i
	}
	return e
}

// formatName is the ClickHouse name of the encoder's format.
func (e *rowEncoder) formatName() string {
	if e.format == FormatJSONEachRow {
		return "JSONEachRow"
	}
	return "TabSeparated"
}

// append appends m's row. An error is permanent and names the message and
// the column.
func (e *rowEncoder) append(dst []byte, m *weir.Message) ([]byte, error) {
	start := len(dst)
	json := e.format == FormatJSONEachRow
	if json {
		dst = append(dst, '{')
	}
	present := 0
	for i, c := range e.cols {
		if json {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, c.name)
			dst = append(dst, ':')
		} else if i > 0 {
			dst = append(dst, '\t')
		}
		if c.messageID {
			dst = appendString(dst, string(m.ID), json, false)
			continue
		}
		v, ok := m.Payload[c.name]
		if ok {
			present++
		}
		var err error
		if dst, err = e.appendValue(dst, c.typ, v, false); err != nil {
			return dst[:start], permanent("message %s: column %q (%s): %v", m.ID, c.name, c.typ.raw, err)
		}
	}
	if present != len(m.Payload) {
		return dst[:start], e.unknownColumn(m)
	}
	if json {
		dst = append(dst, '}')
	}
	return append(dst, '\n'), nil
}

// unknownColumn names the payload column of m that the INSERT does not
// take.
func (e *rowEncoder) unknownColumn(m *weir.Message) error {
	keys := make([]string, 0, len(m.Payload))
	for k := range m.Payload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, ok := e.index[k]
		if !ok {
			return permanent("message %s: column %q is not among the columns the sink writes to the table (%s); add it to the table or drop it from the rows", m.ID, k, e.columnList())
		}
		if e.cols[i].messageID {
			return permanent("message %s: column %q is message_id_column, filled by the sink; the row must not carry it", m.ID, k)
		}
	}
	return permanent("message %s: columns do not match the table's", m.ID)
}

func (e *rowEncoder) columnList() string {
	names := make([]string, len(e.cols))
	for i, c := range e.cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// appendValue writes v as a value of t. inArray: inside an Array, where
// TabSeparated quotes strings.
func (e *rowEncoder) appendValue(dst []byte, t *colType, v any, inArray bool) ([]byte, error) {
	json := e.format == FormatJSONEachRow
	if v == nil {
		if !t.nullable {
			return dst, fmt.Errorf("no value (null or missing) for a column that is not Nullable")
		}
		if json {
			return append(dst, "null"...), nil
		}
		if inArray {
			return append(dst, "NULL"...), nil
		}
		return append(dst, `\N`...), nil
	}
	quoted := json || inArray
	switch t.kind {
	case kindInt, kindUint:
		return appendInteger(dst, t, v)
	case kindFloat:
		f, ok := toFloat(v)
		if !ok {
			return dst, fmt.Errorf("a %T is not a number", v)
		}
		switch {
		case math.IsNaN(f):
			return appendMaybeQuoted(dst, "nan", json), nil
		case math.IsInf(f, 1):
			return appendMaybeQuoted(dst, "inf", json), nil
		case math.IsInf(f, -1):
			return appendMaybeQuoted(dst, "-inf", json), nil
		}
		return strconv.AppendFloat(dst, f, 'g', -1, t.bits), nil
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return dst, fmt.Errorf("a %T is not a bool", v)
		}
		return strconv.AppendBool(dst, b), nil
	case kindString, kindFixedString:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return dst, fmt.Errorf("a %T is not a string or bytes", v)
		}
		if t.kind == kindFixedString && len(s) > t.size {
			return dst, fmt.Errorf("%d bytes do not fit FixedString(%d)", len(s), t.size)
		}
		return appendString(dst, s, json, quoted), nil
	case kindDate:
		switch x := v.(type) {
		case string:
			if _, err := time.Parse("2006-01-02", x); err != nil {
				return dst, fmt.Errorf("%q is not a date YYYY-MM-DD", x)
			}
			return appendString(dst, x, json, quoted), nil
		case int64:
			return appendString(dst, time.Unix(x*86400, 0).UTC().Format("2006-01-02"), json, quoted), nil
		}
		return dst, fmt.Errorf("a %T is not a date (a string YYYY-MM-DD or days since 1970 as an integer)", v)
	case kindDateTime:
		switch x := v.(type) {
		case string:
			if _, err := time.Parse(time.DateTime, x); err != nil {
				return dst, fmt.Errorf("%q is not a date-time YYYY-MM-DD hh:mm:ss", x)
			}
			return appendString(dst, x, json, quoted), nil
		case int64:
			if x < 0 || x > math.MaxUint32 {
				return dst, fmt.Errorf("unix time %d is out of DateTime's range", x)
			}
			return strconv.AppendInt(dst, x, 10), nil
		}
		return dst, fmt.Errorf("a %T is not a date-time (a string YYYY-MM-DD hh:mm:ss or unix seconds as an integer)", v)
	case kindText:
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("a %T is not a string", v)
		}
		return appendString(dst, s, json, quoted), nil
	case kindDecimal:
		switch x := v.(type) {
		case string:
			if _, err := strconv.ParseFloat(x, 64); err != nil || strings.ContainsAny(x, "xXpPnN_") {
				return dst, fmt.Errorf("%q is not a decimal number", x)
			}
			return append(dst, x...), nil
		case int64:
			return strconv.AppendInt(dst, x, 10), nil
		case uint64:
			return strconv.AppendUint(dst, x, 10), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return dst, fmt.Errorf("%v is not a decimal number", x)
			}
			return strconv.AppendFloat(dst, x, 'f', -1, 64), nil
		}
		return dst, fmt.Errorf("a %T is not a decimal number", v)
	case kindArray:
		xs, ok := v.([]any)
		if !ok {
			return dst, fmt.Errorf("a %T is not a list", v)
		}
		dst = append(dst, '[')
		for i, x := range xs {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = e.appendValue(dst, t.elem, x, true); err != nil {
				return dst, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return append(dst, ']'), nil
	}
	return dst, fmt.Errorf("unsupported column type %s", t.raw)
}

// appendInteger writes v as an integer of t's width, checking the range.
func appendInteger(dst []byte, t *colType, v any) ([]byte, error) {
	var neg bool
	var mag uint64
	switch x := v.(type) {
	case int64:
		neg, mag = x < 0, uint64(x)
		if neg {
			mag = uint64(-(x + 1)) + 1
		}
	case uint64:
		mag = x
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.Abs(x) >= 1<<63 {
			return dst, fmt.Errorf("%v is not an integer", x)
		}
		neg = x < 0
		mag = uint64(math.Abs(x))
	case bool:
		if x {
			mag = 1
		}
	default:
		return dst, fmt.Errorf("a %T is not an integer", v)
	}
	if t.kind == kindUint {
		if neg && mag != 0 {
			return dst, fmt.Errorf("-%d is negative; UInt%d holds no negative values", mag, t.bits)
		}
		if t.bits < 64 && mag > 1<<t.bits-1 {
			return dst, fmt.Errorf("%d does not fit UInt%d", mag, t.bits)
		}
		return strconv.AppendUint(dst, mag, 10), nil
	}
	limit := uint64(1) << (t.bits - 1) // max magnitude of a negative value
	if (!neg && mag > limit-1) || (neg && mag > limit) {
		if neg {
			return dst, fmt.Errorf("-%d does not fit Int%d", mag, t.bits)
		}
		return dst, fmt.Errorf("%d does not fit Int%d", mag, t.bits)
	}
	if neg {
		dst = append(dst, '-')
	}
	return strconv.AppendUint(dst, mag, 10), nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func appendMaybeQuoted(dst []byte, s string, quote bool) []byte {
	if quote {
		return append(append(append(dst, '"'), s...), '"')
	}
	return append(dst, s...)
}

// appendString writes s for the format: a JSON string, a quoted literal
// inside a TabSeparated array, or an escaped TabSeparated field.
func appendString(dst []byte, s string, json, quoted bool) []byte {
	switch {
	case json:
		return appendJSONString(dst, s)
	case quoted:
		dst = append(dst, '\'')
		dst = appendEscaped(dst, s, true)
		return append(dst, '\'')
	}
	return appendEscaped(dst, s, false)
}

// appendEscaped escapes s as ClickHouse's TabSeparated does (and, with
// quote, for a single-quoted literal).
func appendEscaped(dst []byte, s string, quote bool) []byte {
	if !needsEscape(s, quote) {
		return append(dst, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case 0:
			dst = append(dst, '\\', '0')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\'':
			if quote {
				dst = append(dst, '\\', '\'')
			} else {
				dst = append(dst, c)
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// needsEscape reports whether appendEscaped would change s (the common
// case is no, and a plain copy is several times faster).
func needsEscape(s string, quote bool) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '\t', '\n', '\r', 0, '\b', '\f':
			return true
		case '\'':
			if quote {
				return true
			}
		}
	}
	return false
}

// appendJSONString writes s as a JSON string. Bytes that are not valid
// UTF-8 pass through unchanged: ClickHouse stores String bytes as sent.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c != '"' && c != '\\' && c != 0x7f
	}
	if plain {
		return append(append(dst, s...), '"')
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20 || c == 0x7f:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}
