package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.ytsaurus.tech/yt/go/yson"
	"gopkg.in/yaml.v3"
)

// Parse decodes a pipeline spec, choosing the format by the extension of
// filename: .yson is YSON, .yaml and .yml are YAML, and anything else is
// sniffed (YSON if it parses as YSON, else YAML). filename is used only for
// that choice and in error messages; nothing is read from disk.
//
// The result has defaults applied but is not validated: call Validate.
func Parse(data []byte, filename string) (*Pipeline, error) {
	var p *Pipeline
	var err error
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".yson":
		p, err = ParseYSON(data)
	case ".yaml", ".yml":
		p, err = ParseYAML(data)
	default:
		p, err = parseSniffed(data)
	}
	if err != nil {
		if n := ProblemCount(err); n > 1 {
			return nil, fmt.Errorf("spec %s: %d problems:\n%w", filename, n, err)
		}
		return nil, fmt.Errorf("spec %s: %w", filename, err)
	}
	return p, nil
}

// ProblemCount returns how many problems err (from Parse*, Validate or
// DecodeParameters) reports, counting those a *MoreError left out.
func ProblemCount(err error) int {
	if err == nil {
		return 0
	}
	j, ok := err.(interface{ Unwrap() []error })
	for !ok {
		if err = errors.Unwrap(err); err == nil {
			return 1
		}
		j, ok = err.(interface{ Unwrap() []error })
	}
	n := 0
	for _, e := range j.Unwrap() {
		if m, ok := e.(*MoreError); ok {
			n += m.N
		} else {
			n++
		}
	}
	return n
}

// parseSniffed tries YSON and then YAML. Only syntax decides the format: once
// a document parses as YSON, its decoding errors are reported as they are.
func parseSniffed(data []byte) (*Pipeline, error) {
	raw, ysonErr := ysonTree(data)
	if ysonErr == nil {
		return decodePipeline(raw)
	}
	raw, yamlErr := yamlTree(data)
	if yamlErr == nil {
		return decodePipeline(raw)
	}
	return nil, fmt.Errorf("neither YSON nor YAML (name the file .yson or .yaml for a precise error): as YSON: %w; as YAML: %w", ysonErr, yamlErr)
}

// ParseYSON decodes a pipeline spec written in text YSON.
//
// The document is either a full map (`{"computations" = {...}; ...}`) or, the
// way the seed writes specs, a top-level map fragment without enclosing braces
// (`"computations" = {...};`). `//` line comments are accepted and removed
// before decoding (YSON itself has none); `//` inside a quoted string is kept.
// Keys may be quoted or not; booleans are %true/%false; `#` (entity) means the
// key is absent. YSON attributes (`<a=b>value`) are rejected. A duplicate key
// is an error.
//
// Unknown keys and values of the wrong type are errors naming their full path;
// all of them are reported together (see Error). The result has defaults
// applied but is not validated: call Validate.
func ParseYSON(data []byte) (*Pipeline, error) {
	raw, err := ysonTree(data)
	if err != nil {
		return nil, err
	}
	return decodePipeline(raw)
}

// ParseYAML decodes a pipeline spec written in YAML, with the same keys,
// strictness and defaults as ParseYSON. Anchors, aliases and merge keys work;
// duplicate keys and a second document are errors. A YAML timestamp value is
// read as its RFC 3339 text (quote it to keep it verbatim).
func ParseYAML(data []byte) (*Pipeline, error) {
	raw, err := yamlTree(data)
	if err != nil {
		return nil, err
	}
	return decodePipeline(raw)
}

// decodePipeline decodes the generic tree into a Pipeline with defaults.
func decodePipeline(raw map[string]any) (*Pipeline, error) {
	p := &Pipeline{}
	p.Dynamic.SetDefaults()
	d := decoder{specHints: true}
	d.decodeStruct("", raw, reflect.ValueOf(p).Elem())
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	// Computations were defaulted one by one as they were allocated; only the
	// inheritance from the dynamic spec is left. Calling p.SetDefaults here
	// would replace explicit zeros that Validate must reject.
	p.inheritDynamic()
	return p, nil
}

// afterDecode lifts the engine keys processing_mode and
// allow_batching_with_relaxed_guarantees out of parameters (where Flow reads
// them) into the typed fields, which may also be set directly (as the seed
// writes processing_mode). Both places given with different values is an
// error; after lifting, Parameters holds only the class's own keys.
func (c *Computation) afterDecode(d *decoder, path string, raw map[string]any) {
	_, directMode := raw["processing_mode"]
	if v, ok := c.Parameters["processing_mode"]; ok {
		ppath := joinKey(joinKey(path, "parameters"), "processing_mode")
		var mode ProcessingMode
		before := len(d.errs.errs)
		d.decode(ppath, v, reflect.ValueOf(&mode).Elem())
		switch {
		case len(d.errs.errs) != before:
			// The type error is reported; comparing would only add noise.
		case directMode && mode != c.ProcessingMode:
			d.errs.add(joinKey(path, "processing_mode"),
				"set to %q here and to %q in parameters.processing_mode; keep one of them", c.ProcessingMode, mode)
		default:
			c.ProcessingMode = mode
		}
		delete(c.Parameters, "processing_mode")
	}
	_, directBatching := raw["allow_batching_with_relaxed_guarantees"]
	if v, ok := c.Parameters["allow_batching_with_relaxed_guarantees"]; ok {
		ppath := joinKey(joinKey(path, "parameters"), "allow_batching_with_relaxed_guarantees")
		var allow bool
		before := len(d.errs.errs)
		d.decode(ppath, v, reflect.ValueOf(&allow).Elem())
		switch {
		case len(d.errs.errs) != before:
		case directBatching && allow != c.AllowBatchingWithRelaxedGuarantees:
			d.errs.add(joinKey(path, "allow_batching_with_relaxed_guarantees"),
				"set to %t here and to %t in parameters.allow_batching_with_relaxed_guarantees; keep one of them",
				c.AllowBatchingWithRelaxedGuarantees, allow)
		default:
			c.AllowBatchingWithRelaxedGuarantees = allow
		}
		delete(c.Parameters, "allow_batching_with_relaxed_guarantees")
	}
	if len(c.Parameters) == 0 {
		c.Parameters = nil
	}
}

// afterDecode lifts at_most_once_strategy out of the sink's parameters (where
// Flow reads it) into AtMostOnceStrategy, which may also be set directly (as
// the seed writes it). Both given and different is an error.
func (s *Sink) afterDecode(d *decoder, path string, raw map[string]any) {
	v, ok := s.Parameters["at_most_once_strategy"]
	if !ok {
		return
	}
	ppath := joinKey(joinKey(path, "parameters"), "at_most_once_strategy")
	var amo *AtMostOnceStrategy
	before := len(d.errs.errs)
	d.decode(ppath, v, reflect.ValueOf(&amo).Elem())
	_, direct := raw["at_most_once_strategy"]
	switch {
	case len(d.errs.errs) != before:
	case direct && !reflect.DeepEqual(amo, s.AtMostOnceStrategy):
		d.errs.add(joinKey(path, "at_most_once_strategy"),
			"given here and, differently, in parameters.at_most_once_strategy; keep one of them")
	default:
		s.AtMostOnceStrategy = amo
	}
	delete(s.Parameters, "at_most_once_strategy")
	if len(s.Parameters) == 0 {
		s.Parameters = nil
	}
}

// ysonTree turns YSON text into a generic map, see ParseYSON for the accepted
// forms.
func ysonTree(data []byte) (map[string]any, error) {
	text := stripYSONComments(bytes.TrimPrefix(data, utf8BOM))
	trimmed := bytes.TrimLeft(text, " \t\r\n\v\f")
	fragment := len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '<')
	src := text
	if fragment {
		// Wrapping keeps byte offsets (shifted by one) for error positions.
		src = make([]byte, 0, len(text)+3)
		src = append(src, '{')
		src = append(src, text...)
		src = append(src, '\n', '}')
	}
	r := yson.NewReaderFromBytes(src)
	b := ysonBuilder{r: r}
	v, err := b.value("")
	if err == nil {
		err = r.CheckFinish()
	}
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return nil, se
		}
		msg := "YSON syntax error"
		if off, ok := ysonErrorOffset(text, fragment); ok {
			msg += position(text, off)
			if text[off] == ',' {
				msg += " (YSON separates list items and map entries with ';', not ',': [\"a\"; \"b\"])"
			}
		}
		return nil, &Error{Msg: msg, Err: err}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf("the document must be a map (or a map fragment), got %s", describe(v))}
	}
	return m, nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// ysonBuilder builds the generic tree from a yson.Reader. It mirrors
// yson.Unmarshal into `any` but reports duplicate keys and attributes with
// their path and returns errors where package yson would panic on an
// unexpected reader state.
type ysonBuilder struct {
	r *yson.Reader
}

// value reads one node. Nesting is bounded by the YSON scanner (256 levels),
// which bounds the recursion.
func (b *ysonBuilder) value(path string) (any, error) {
	e, err := b.r.Next(false)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return nil, &Error{Path: path, Msg: fmt.Sprintf("%s is out of range: a YSON integer is 64-bit, %d … %d (up to %d with the suffix u)",
				cutEcho(ne.Num), int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64))}
		}
		return nil, err
	}
	switch e {
	case yson.EventBeginAttrs:
		return nil, &Error{Path: path, Msg: "YSON attributes (<...>) are not supported in a spec; remove them"}
	case yson.EventLiteral:
		switch b.r.Type() {
		case yson.TypeEntity:
			return nil, nil
		case yson.TypeBool:
			return b.r.Bool(), nil
		case yson.TypeString:
			return b.r.String(), nil
		case yson.TypeInt64:
			return b.r.Int64(), nil
		case yson.TypeUint64:
			return b.r.Uint64(), nil
		case yson.TypeFloat64:
			return b.r.Float64(), nil
		}
		return nil, fmt.Errorf("unexpected YSON literal of type %v", b.r.Type())
	case yson.EventBeginMap:
		m := map[string]any{}
		for {
			ok, err := b.r.NextKey()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			k := b.r.String()
			kp := joinKey(path, k)
			if _, dup := m[k]; dup {
				return nil, &Error{Path: kp, Msg: "duplicate key; keep one of them"}
			}
			v, err := b.value(kp)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		if e, err := b.r.Next(false); err != nil {
			return nil, err
		} else if e != yson.EventEndMap {
			return nil, errors.New("unbalanced map")
		}
		return m, nil
	case yson.EventBeginList:
		l := []any{}
		for {
			ok, err := b.r.NextListItem()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			v, err := b.value(joinIndex(path, len(l)))
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		if e, err := b.r.Next(false); err != nil {
			return nil, err
		} else if e != yson.EventEndList {
			return nil, errors.New("unbalanced list")
		}
		return l, nil
	case yson.EventEOF:
		return nil, errors.New("unexpected end of input")
	}
	return nil, fmt.Errorf("unexpected YSON token (event %d)", e)
}

// ysonErrorOffset returns the offset in text of the first byte at which
// the YSON scanner fails, or false when the scanner accepts every prefix
// (the error then comes from a literal, e.g. an integer out of range, or
// from the end of input). package yson reports no positions, so this finds
// the shortest failing prefix by bisection: prefixes shorter than the
// error only ever fail with "unexpected end", longer ones fail with the
// real error.
func ysonErrorOffset(text []byte, fragment bool) (int, bool) {
	valid := yson.Valid
	if fragment {
		valid = yson.ValidMapFragment
	}
	failsAt := func(n int) bool {
		err := valid(text[:n])
		return err != nil && !strings.Contains(err.Error(), "unexpected end")
	}
	if !failsAt(len(text)) {
		return 0, false
	}
	lo, hi := 0, len(text) // failsAt(hi) holds; find the smallest such hi
	for lo < hi {
		mid := lo + (hi-lo)/2
		if failsAt(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	off := lo - 1 // the byte whose scan failed
	if off < 0 {
		off = 0
	}
	return off, true
}

// position returns " at line L, column C" for offset off of text.
func position(text []byte, off int) string {
	line := 1 + bytes.Count(text[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(text[:off], '\n')
	return fmt.Sprintf(" at line %d, column %d", line, col)
}

// stripYSONComments replaces every `//` line comment outside a quoted string
// with spaces, keeping every newline and byte offset, so that error positions
// still point into the original text. Text YSON cannot contain '/' outside a
// string, so this never changes the meaning of a valid document. A byte that
// starts a binary YSON literal (0x01–0x06) outside a string means the input
// is binary YSON, which has no comments: it is returned unchanged.
func stripYSONComments(data []byte) []byte {
	var out []byte // allocated on the first comment
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++ // skip the escaped byte, which may be '"'
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c >= 0x01 && c <= 0x06:
			return data
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			if out == nil {
				out = append([]byte(nil), data...)
			}
			for ; i < len(data) && data[i] != '\n'; i++ {
				out[i] = ' '
			}
		}
	}
	if out == nil {
		return data
	}
	return out
}

// yamlTree turns a YAML document into a generic map with the value set of
// normalizeGo.
func yamlTree(data []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]any{}, nil // an empty document
		}
		return nil, &Error{Msg: "YAML syntax error", Err: err}
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Msg: "more than one YAML document (---); a spec file holds one pipeline"}
	}
	if err := checkYAMLNumbers(&doc, ""); err != nil {
		return nil, err
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, &Error{Msg: "YAML syntax error", Err: err}
	}
	if v == nil {
		return map[string]any{}, nil
	}
	n, err := normalizeGo(v)
	if err != nil {
		return nil, &Error{Msg: "cannot read the YAML document", Err: err}
	}
	m, ok := n.(map[string]any)
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf("the document must be a map, got %s", describe(n))}
	}
	return m, nil
}

// checkYAMLNumbers refuses an integer written with a leading zero (010,
// -07): YAML 1.1, which the decoder follows there, reads it as octal (010
// is 8), while a reader — and YAML 1.2 — sees ten. Writing 0o10 says octal
// explicitly. path locates n for the error.
func checkYAMLNumbers(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = joinIndex(path, i)
			}
			if err := checkYAMLNumbers(c, p); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkYAMLNumbers(n.Content[i+1], joinKey(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.ShortTag() == "!!int" && n.Style == 0 && leadingZero(n.Value) {
			return &Error{Path: path, Msg: fmt.Sprintf("%s at line %d has a leading zero, which YAML reads as an octal number; write it without the zero (or 0o… for octal)", cutEcho(n.Value), n.Line)}
		}
	}
	return nil
}

// leadingZero reports a decimal-looking integer with a leading zero.
func leadingZero(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9'
}
