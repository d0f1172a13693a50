package spec

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DecodeParameters fills out, a pointer to a struct, from a raw parameters map
// (Computation.Parameters, Source.Parameters, Sink.Parameters), with the same
// strictness as the pipeline decoders: an unknown key is an error naming its
// full path (with a did-you-mean), a value of the wrong type is an error naming
// the path and the expected type, and Duration fields accept integer
// milliseconds or duration strings. path is the location of params in the spec,
// for example "computations.Counter.parameters"; it prefixes every error.
//
// Struct fields are matched by their `yson` tag, the tag the spec types use
// (the same rule as package yson): `yson:"name"` decodes key "name",
// `yson:"-"` is never decoded, an exported field without a tag decodes the key
// spelled like the Go field name, and an untagged embedded struct has its
// fields decoded inline. The tag option "required" (`yson:"url,required"`)
// makes a missing key an error; package yson ignores the option. Supported
// field types: string, bool, integers (range-checked; floats are not
// integers), floats, Duration, structs, pointers, slices, maps with string
// keys, and `any` (which receives the raw value).
//
// Defaults: out keeps the value of every field whose key is absent, so set
// defaults in out before the call; if out implements Defaulter, SetDefaults is
// called first, and it is also called on every struct the decoder allocates
// (behind a pointer, as a map value or as a list item). A struct field that
// is already in out is decoded in place, keeping the values out gave it.
//
// Every problem is collected; the result is nil or errors.Join of *Error
// values sorted by path. params may be nil. Values may be the normalized
// decoder values or plain Go values (ints of any size, []string,
// map[string]string, time.Duration — the last is taken as a duration, not as
// milliseconds); a Go struct is not a map and is reported as a type error.
func DecodeParameters(path string, params map[string]any, out any) error {
	rv := reflect.ValueOf(out)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return &Error{Path: path, Msg: fmt.Sprintf("DecodeParameters needs a non-nil pointer to a struct, got %T", out)}
	}
	if d, ok := out.(Defaulter); ok {
		d.SetDefaults()
	}
	raw := map[string]any{}
	if params != nil {
		n, err := normalizeGo(params)
		if err != nil {
			return &Error{Path: path, Msg: "cannot read the parameters", Err: err}
		}
		if m, ok := n.(map[string]any); ok {
			raw = m
		}
	}
	var d decoder
	d.decodeStruct(path, raw, rv.Elem())
	return d.errs.err()
}

// decoder walks a generic value (the output of the YSON or YAML front end, see
// normalizeGo for the value set) into a typed Go value, collecting errors.
type decoder struct {
	errs errorList
	// specHints enables the unknown-key hints that only make sense for the
	// spec's own structs (Flow-only settings, keys that belong elsewhere);
	// DecodeParameters leaves it off so connector structs get plain errors.
	specHints bool
}

// afterDecoder is implemented by spec types that post-process their raw map
// after the generic decode (lifting engine keys out of parameters).
type afterDecoder interface {
	afterDecode(d *decoder, path string, raw map[string]any)
}

var durationType = reflect.TypeOf(Duration(0))

// decode stores raw into v (settable). It never panics on any raw value; an
// unsupported Go type in v is reported as an error (a bug in the target
// struct, not in the spec).
func (d *decoder) decode(path string, raw any, v reflect.Value) {
	t := v.Type()
	if t == durationType {
		dur, e := durationFrom(raw)
		if e != nil {
			e.Path = path
			d.errs.addErr(e)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if raw == nil {
			v.SetZero()
			return
		}
		nv := reflect.New(t.Elem())
		setDefaults(nv)
		d.decode(path, raw, nv.Elem())
		v.Set(nv)
	case reflect.Struct:
		if raw == nil {
			return
		}
		m, ok := raw.(map[string]any)
		if !ok {
			d.typeError(path, "a map", raw)
			return
		}
		d.decodeStruct(path, m, v)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			d.errs.add(path, "cannot decode into Go type %s: map keys must be strings (a bug in the target struct)", t)
			return
		}
		if raw == nil {
			return
		}
		m, ok := raw.(map[string]any)
		if !ok {
			d.typeError(path, "a map", raw)
			return
		}
		if len(m) == 0 {
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t, len(m)))
		}
		for _, k := range sortedKeys(m) {
			ev := reflect.New(t.Elem()).Elem()
			d.decodeElem(joinKey(path, k), m[k], ev)
			v.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
	case reflect.Slice:
		if raw == nil {
			v.SetZero()
			return
		}
		l, ok := raw.([]any)
		if !ok {
			d.typeError(path, "a list", raw)
			return
		}
		if len(l) == 0 {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(t, len(l), len(l))
		for i, item := range l {
			d.decodeElem(joinIndex(path, i), item, s.Index(i))
		}
		v.Set(s)
	case reflect.Interface:
		if t.NumMethod() != 0 {
			d.errs.add(path, "cannot decode into Go interface type %s (a bug in the target struct)", t)
			return
		}
		if raw == nil {
			v.SetZero()
			return
		}
		v.Set(reflect.ValueOf(raw))
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.typeError(path, "a string", raw)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			d.typeError(path, "a boolean (%true/%false in YSON, true/false in YAML)", raw)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var n int64
		switch x := raw.(type) {
		case int64:
			n = x
		case uint64:
			if x > math.MaxInt64 {
				d.errs.add(path, "%d is out of range for %s; use a smaller value", x, t)
				return
			}
			n = int64(x)
		default:
			d.typeError(path, "an integer", raw)
			return
		}
		if v.OverflowInt(n) {
			d.errs.add(path, "%d is out of range for %s; use a smaller value", n, t)
			return
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var n uint64
		switch x := raw.(type) {
		case uint64:
			n = x
		case int64:
			if x < 0 {
				d.errs.add(path, "expected a non-negative integer, got %d", x)
				return
			}
			n = uint64(x)
		default:
			d.typeError(path, "a non-negative integer", raw)
			return
		}
		if v.OverflowUint(n) {
			d.errs.add(path, "%d is out of range for %s; use a smaller value", n, t)
			return
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		var f float64
		switch x := raw.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		default:
			d.typeError(path, "a number", raw)
			return
		}
		if t.Kind() == reflect.Float32 && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
			d.errs.add(path, "%g is out of range for %s", f, t)
			return
		}
		v.SetFloat(f)
	default:
		d.errs.add(path, "cannot decode into Go type %s (a bug in the target struct)", t)
	}
}

// decodeElem decodes a map value or list item into a fresh ev. Unlike a
// struct field, a null element of struct type becomes a struct with its
// defaults, so that YAML's `streams: {events: }` declares a stream.
func (d *decoder) decodeElem(path string, raw any, ev reflect.Value) {
	t := ev.Type()
	switch {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Elem() != durationType:
		nv := reflect.New(t.Elem())
		setDefaults(nv)
		d.decode(path, raw, nv.Elem())
		ev.Set(nv)
	case t.Kind() == reflect.Struct:
		setDefaults(ev.Addr())
		d.decode(path, raw, ev)
	default:
		d.decode(path, raw, ev)
	}
}

// decodeStruct decodes the keys of m into the fields of struct v (addressable).
// Unknown keys are errors; keys are visited in sorted order so that the
// decoder's behaviour does not depend on map iteration.
func (d *decoder) decodeStruct(path string, m map[string]any, v reflect.Value) {
	info := structInfoOf(v.Type())
	for _, k := range sortedKeys(m) {
		f, ok := info.byName[k]
		if !ok {
			d.unknownKey(joinKey(path, k), k, info.names)
			continue
		}
		d.decode(joinKey(path, k), m[k], fieldByIndex(v, f.index))
	}
	for _, f := range info.fields {
		if f.required {
			if _, ok := m[f.name]; !ok {
				d.errs.add(joinKey(path, f.name), "required key is missing; set it")
			}
		}
	}
	if v.CanAddr() {
		if h, ok := v.Addr().Interface().(afterDecoder); ok {
			h.afterDecode(d, path, m)
		}
	}
}

// fieldByIndex is reflect.Value.FieldByIndex for the non-pointer embeddings
// structInfoOf produces.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		v = v.Field(i)
	}
	return v
}

func (d *decoder) typeError(path, expected string, raw any) {
	d.errs.add(path, "expected %s, got %s", expected, describe(raw))
}

// unknownKey reports a key the target struct does not have: with a
// did-you-mean when a known key is close, a note when it is a Flow setting
// weir does not support or belongs elsewhere in the spec, else the list of
// valid keys.
func (d *decoder) unknownKey(path, key string, known []string) {
	msg := "unknown key"
	if s := didYouMean(key, known); s != "" {
		msg += s
	} else if hint, ok := flowOnlyKeys[key]; ok && d.specHints {
		msg += fmt.Sprintf(": %q is a Flow setting that weir does not support (%s); remove it", key, hint)
	} else if where, ok := keyHomes()[key]; ok && d.specHints {
		msg += fmt.Sprintf(": %q belongs %s, not here; move it", key, where)
	} else if len(known) > 0 {
		msg += "; valid keys here: " + strings.Join(known, ", ")
	} else {
		msg += "; this struct takes no keys"
	}
	d.errs.add(path, "%s", msg)
}

// flowOnlyKeys are keys of Flow's pipeline, computation, timer and column
// specs that weir deliberately does not implement, with what to do instead.
var flowOnlyKeys = map[string]string{
	"resources":                      "weir runs on the workers it is given",
	"validate_binary_version":        "weir checks the class registry instead",
	"binary_version":                 "weir checks the class registry instead",
	"validate_binary_checksum":       "weir checks the class registry instead",
	"binary_checksum":                "weir checks the class registry instead",
	"processing_function":            "name the code with computation_class_name",
	"processing_function_parameters": "put class parameters under parameters",
	"streams_dependency":             "weir uses Flow's default dependencies: timers depend on all input and source streams, outputs on everything",
	"required_resource_ids":          "weir runs on the workers it is given",
	"key_visitor_streams":            "not implemented",
	"external_state_managers":        "not implemented",
	"external_state_joiners":         "not implemented",
	"state_joiners":                  "not implemented",
	"heavy_hitters":                  "not implemented",
	"pivot_finder":                   "weir uses a fixed partition_count",
	"input_ordering":                 "not implemented",
	"distribution_ordering":          "weir always distributes in strict order",
	"worker_group":                   "not implemented",
	"allow_timer_self_dependency":    "timers watch input and source streams only",
	"streams_with_delays":            "not implemented",
	"deduplicate_equal_timestamps":   "not implemented",
	"sort_order":                     "weir schemas are unsorted",
	"required":                       "weir schemas do not mark required columns",
	"skip_if_expression":             "not implemented",
	"throttlers":                     "not implemented",
	"job_manager":                    "set the controller tunables directly under dynamic_spec",
}

// keyHomes maps each key of the spec's own structs to where it belongs, for
// the "belongs elsewhere" hint. Built once from the types' tags.
var keyHomes = sync.OnceValue(func() map[string]string {
	homes := map[string]string{}
	for _, h := range []struct {
		t     reflect.Type
		where string
	}{
		// Order matters: the first home of a key wins.
		{reflect.TypeOf(Pipeline{}), "at the top level of the spec"},
		{reflect.TypeOf(Computation{}), "in a computation (computations.<id>)"},
		{reflect.TypeOf(Sink{}), "in a sink (computations.<id>.sinks.<id>)"},
		{reflect.TypeOf(AtMostOnceStrategy{}), "in a sink's at_most_once_strategy"},
		{reflect.TypeOf(Source{}), "in a source (computations.<id>.source_streams.<id>)"},
		{reflect.TypeOf(TimerStream{}), "in a timer stream (computations.<id>.timer_streams.<id>)"},
		{reflect.TypeOf(WatermarkStrategy{}), "in a computation's watermark_strategy"},
		{reflect.TypeOf(DynamicSpec{}), "in dynamic_spec"},
		{reflect.TypeOf(Stream{}), "in a stream (streams.<id>)"},
		{reflect.TypeOf(Column{}), "in a column ({name; type})"},
	} {
		for _, n := range structInfoOf(h.t).names {
			if _, ok := homes[n]; !ok {
				homes[n] = h.where
			}
		}
	}
	return homes
})

// structInfo describes the decodable fields of a struct type.
type structInfo struct {
	fields []fieldInfo
	byName map[string]*fieldInfo
	names  []string // sorted
}

type fieldInfo struct {
	name     string
	index    []int
	required bool
}

var structInfoCache sync.Map // reflect.Type -> *structInfo

// structInfoOf lists the fields of struct type t by key, following the yson
// tag rules documented on DecodeParameters. The first field to claim a key
// wins: shallower fields before embedded ones, then declaration order.
func structInfoOf(t reflect.Type) *structInfo {
	if v, ok := structInfoCache.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{byName: map[string]*fieldInfo{}}
	type level struct {
		t     reflect.Type
		index []int
	}
	// Breadth first: the fields of a struct claim their keys before the fields
	// of the structs it embeds, as in package yson and encoding/json.
	queue := []level{{t: t}}
	for depth := 0; len(queue) > 0 && depth <= 16; depth++ {
		var next []level
		for _, l := range queue {
			for i := 0; i < l.t.NumField(); i++ {
				f := l.t.Field(i)
				tag, tagged := f.Tag.Lookup("yson")
				parts := strings.Split(tag, ",")
				if parts[0] == "-" {
					continue
				}
				idx := append(append([]int(nil), l.index...), i)
				if f.Anonymous && !tagged && f.Type.Kind() == reflect.Struct {
					next = append(next, level{t: f.Type, index: idx})
					continue
				}
				if !f.IsExported() {
					continue
				}
				name := parts[0]
				if name == "" {
					name = f.Name
				}
				if _, dup := info.byName[name]; dup {
					continue
				}
				required := slices.Contains(parts[1:], "required")
				info.fields = append(info.fields, fieldInfo{name: name, index: idx, required: required})
				info.byName[name] = nil // set below, once fields stops growing
			}
		}
		queue = next
	}
	for i := range info.fields {
		info.byName[info.fields[i].name] = &info.fields[i]
		info.names = append(info.names, info.fields[i].name)
	}
	sort.Strings(info.names)
	v, _ := structInfoCache.LoadOrStore(t, info)
	return v.(*structInfo)
}

// setDefaults calls SetDefaults on p (a pointer) when its type implements
// Defaulter.
func setDefaults(p reflect.Value) {
	if p.CanInterface() {
		if d, ok := p.Interface().(Defaulter); ok {
			d.SetDefaults()
		}
	}
}

// describe names the kind of a generic value for type errors, with the value
// when it is short.
func describe(raw any) string {
	switch v := raw.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return fmt.Sprintf("a string (%q)", v)
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case int64:
		return fmt.Sprintf("an integer (%d)", v)
	case uint64:
		return fmt.Sprintf("an integer (%d)", v)
	case float64:
		return fmt.Sprintf("a float (%s)", strconv.FormatFloat(v, 'g', -1, 64))
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a value of Go type %T", raw)
}

// sortedKeys returns the keys of a string-keyed map in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maxNesting bounds how deeply a spec value may nest. The YSON scanner stops at
// 256 levels; the same bound for YAML and Go values keeps the recursive walks
// shallow and stops a cyclic Go map.
const maxNesting = 256

// errTooDeep is returned by normalizeGo beyond maxNesting.
var errTooDeep = fmt.Errorf("value nested more than %d levels deep (or a cyclic Go value); flatten it", maxNesting)

// normalizeGo converts a Go value into the decoders' generic value set:
// map[string]any, []any, string, int64, uint64, float64, bool and nil.
// Integers of every size become int64 (uint64 above MaxInt64), float32
// becomes float64, []byte becomes a string, maps with string or scalar keys
// become map[string]any (scalar keys formatted as text), slices and arrays
// become []any, time.Duration and Duration become duration strings (so they
// are not mistaken for milliseconds), time.Time becomes RFC 3339 text, and
// pointers are followed. Anything else is kept as is and reported by the
// decoder as a type error where it is used. Nesting beyond maxNesting is an
// error.
func normalizeGo(v any) (any, error) { return normalize(v, 0) }

func normalize(v any, depth int) (any, error) {
	if depth > maxNesting {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case nil, string, bool, int64, uint64, float64:
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case int:
		return int64(x), nil
	case time.Duration:
		return x.String(), nil
	case Duration:
		return x.String(), nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	case []byte:
		return string(x), nil
	}
	return normalizeReflect(reflect.ValueOf(v), depth)
}

func normalizeReflect(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u <= math.MaxInt64 {
			return int64(u), nil
		}
		return u, nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalize(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalize(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if rv.IsNil() {
			return nil, nil
		}
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k, ok := scalarKey(iter.Key())
			if !ok {
				return nil, fmt.Errorf("a map key of Go type %s is not a string or scalar; use string keys", iter.Key().Type())
			}
			n, err := normalize(iter.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	if rv.IsValid() && rv.CanInterface() {
		return rv.Interface(), nil
	}
	return nil, nil
}

// scalarKey formats a map key that is a string, integer, float or boolean.
func scalarKey(k reflect.Value) (string, bool) {
	if k.Kind() == reflect.Interface {
		if k.IsNil() {
			return "", false
		}
		k = k.Elem()
	}
	switch k.Kind() {
	case reflect.String:
		return k.String(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(k.Uint(), 10), true
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(k.Float(), 'g', -1, 64), true
	case reflect.Bool:
		return strconv.FormatBool(k.Bool()), true
	}
	return "", false
}

// StructKey is one key of a spec or parameters struct, as the decoders see
// it (docs/spec.md is generated from these).
type StructKey struct {
	// Name is the key.
	Name string
	// Field is the Go field the key decodes into; Owner is the struct type
	// that declares it (an embedded struct's type for inlined fields).
	Field reflect.StructField
	Owner reflect.Type
	// Required: a missing key is an error.
	Required bool
	// Index is the field's index path from the struct (reflect.FieldByIndex).
	Index []int
}

// StructKeys lists the keys the decoders accept for struct type t, sorted
// by name, following the tag rules documented on DecodeParameters.
func StructKeys(t reflect.Type) []StructKey {
	info := structInfoOf(t)
	out := make([]StructKey, 0, len(info.names))
	for _, name := range info.names {
		f := info.byName[name]
		owner := t
		for _, i := range f.index[:len(f.index)-1] {
			owner = owner.Field(i).Type
		}
		out = append(out, StructKey{Name: name, Field: owner.Field(f.index[len(f.index)-1]), Owner: owner,
			Required: f.required, Index: append([]int(nil), f.index...)})
	}
	return out
}
