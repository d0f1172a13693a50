package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// The static spec is everything a pipeline's stored data depends on; the
// rest is tunables that may change between any two runs. Flow keeps the two
// apart (spec and dynamic_spec) and lets the static spec change only while
// the pipeline is stopped (drained): partition counts decide which partition
// holds a key's outbox rows and timers, stream and computation ids name
// stored rows, group_by decides keys, processing modes and
// allow_batching decide message ids and dedup, sources and sinks hold
// offsets and producer state under their ids. Changing one of them with
// data in flight orphans that data (the outbox rows of a vanished
// partition are never sent).
//
// Static: every field of the spec except the ones listed below, so that a
// field added later is static until someone decides otherwise. In detail:
// streams (ids and schemas); per computation computation_class_name,
// group_by / group_by_schema (compared as the key columns and their
// types), experimental_enable_non_uint_key, the effective dedup table
// (use_compact_input_messages resolved), input_stream_ids,
// output_stream_ids, parameters, processing_mode,
// allow_batching_with_relaxed_guarantees, source_streams (class and
// parameters), sinks (class, input_stream_ids, parameters,
// at_most_once_strategy.enabled), timer_streams, watermark_strategy and
// partition_count (of computations that read internal streams; a source
// computation has one partition per source partition and ignores it).
//
// Dynamic (may change at any time): all of dynamic_spec; per computation
// max_rows_per_batch, max_bytes_per_batch, batch_duration,
// lease_check_period, output_store_count_limit,
// output_store_byte_size_limit, empty_batch_backoff, dead_letter_stream; per sink
// at_most_once_strategy.total_queue_bytes_limit and
// suspend_destruction_duration.
var dynamicKeys = map[reflect.Type]map[string]bool{
	reflect.TypeOf(Pipeline{}): {"dynamic_spec": true},
	reflect.TypeOf(Computation{}): {
		"max_rows_per_batch": true, "max_bytes_per_batch": true, "batch_duration": true,
		"lease_check_period": true, "output_store_count_limit": true,
		"output_store_byte_size_limit": true, "empty_batch_backoff": true,
		// Whether poison messages are dead-lettered changes no stored
		// layout: it may be turned on for a pipeline that is failing.
		"dead_letter_stream": true,
	},
	reflect.TypeOf(AtMostOnceStrategy{}): {"total_queue_bytes_limit": true, "suspend_destruction_duration": true},
}

// StaticSpec is the canonical form of a pipeline's static spec: each leaf
// of the static part, by its spec path (computations.Counter.partition_count),
// holding its value as JSON text. Zero values of typed fields are left out,
// so a key written with its zero value and a key left out compare equal;
// values are taken after defaults, so a default written out and a default
// left out compare equal too. Raw class parameters are kept as written,
// zero values included (a class's default for a missing key may differ).
type StaticSpec map[string]string

// Static returns p's static spec. Call it on a pipeline with defaults set
// (Parse has done it; call SetDefaults on one built in code).
func (p *Pipeline) Static() StaticSpec {
	out := StaticSpec{}
	flattenStatic(out, "", reflect.ValueOf(p).Elem())
	for id, c := range p.Computations {
		if c == nil {
			continue
		}
		path := joinKey("computations", id)
		// Compare what the runtime uses, not how it was written.
		delete(out, path+".group_by")
		if cols := c.KeyColumns(); len(cols) > 0 {
			out[path+".group_by"] = leaf(cols)
		}
		delete(out, path+".use_compact_input_messages")
		out[path+".use_compact_input_messages"] = leaf(c.CompactDedup())
		if len(c.SourceStreams) > 0 {
			delete(out, path+".partition_count")
		}
	}
	return out
}

// flattenStatic adds the static leaves of v under path.
func flattenStatic(out StaticSpec, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface:
		// A raw parameter value: written by the user, so present even when
		// zero (a class's default for an absent key may differ).
		if v.IsNil() {
			out[path] = "null"
			return
		}
		if e := v.Elem(); e.Kind() != reflect.Map {
			out[path] = leaf(e.Interface())
			return
		}
		flattenStatic(out, path, v.Elem())
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Elem().Kind() != reflect.Struct {
			// An explicit pointer to a scalar (use_compact_input_messages):
			// set, even to its zero value, differs from unset.
			out[path] = leaf(v.Elem().Interface())
			return
		}
		flattenStatic(out, path, v.Elem())
	case reflect.Struct:
		if _, ok := v.Interface().(Duration); ok {
			if !v.IsZero() {
				out[path] = leaf(v.Interface())
			}
			return
		}
		skip := dynamicKeys[v.Type()]
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yson"), ",")
			if name == "" || name == "-" || skip[name] {
				continue
			}
			flattenStatic(out, joinKey(path, name), v.Field(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			flattenStatic(out, joinKey(path, fmt.Sprint(k.Interface())), v.MapIndex(k))
		}
	case reflect.Slice:
		if v.Len() > 0 {
			out[path] = leaf(v.Interface())
		}
	default:
		if !v.IsZero() {
			out[path] = leaf(v.Interface())
		}
	}
}

// leaf encodes one value as JSON text; durations as their text form.
func leaf(v any) string {
	if d, ok := v.(Duration); ok {
		v = d.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Spec values are decoded from YSON/YAML into plain Go values, which
		// all marshal; keep something comparable rather than fail.
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}

// Encode returns the canonical bytes of s (JSON, keys sorted), the form a
// pipeline persists.
func (s StaticSpec) Encode() []byte {
	b, err := json.Marshal(map[string]string(s))
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return b
}

// DecodeStatic parses bytes written by Encode.
func DecodeStatic(b []byte) (StaticSpec, error) {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("spec: decode the stored static spec: %w", err)
	}
	return StaticSpec(m), nil
}

// Change is one static field that differs between two static specs.
type Change struct {
	Path     string
	Old, New string // JSON text; empty when the field is absent on that side
}

func (c Change) String() string {
	show := func(s string) string {
		if s == "" {
			return "(unset)"
		}
		if len(s) > 60 {
			return s[:57] + "..."
		}
		return s
	}
	return fmt.Sprintf("%s: %s → %s", c.Path, show(c.Old), show(c.New))
}

// Diff lists the fields whose value differs from s to next, by path.
func (s StaticSpec) Diff(next StaticSpec) []Change {
	var out []Change
	for k, v := range s {
		if w := next[k]; w != v {
			out = append(out, Change{Path: k, Old: v, New: w})
		}
	}
	for k, w := range next {
		if _, ok := s[k]; !ok {
			out = append(out, Change{Path: k, New: w})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// IsPartitionCount reports whether a static spec path is a computation's
// partition_count: a change of it is a rescale, not a static change
// (controller/rescale.go).
func IsPartitionCount(path string) bool {
	return strings.HasPrefix(path, "computations.") && strings.HasSuffix(path, ".partition_count")
}

// PartitionCounts returns the partition_count of every keyed computation
// in s (source computations have none in a static spec).
func (s StaticSpec) PartitionCounts() map[string]int {
	out := map[string]int{}
	for path, v := range s {
		if !IsPartitionCount(path) {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(path, "computations."), ".partition_count")
		if n, err := strconv.Atoi(v); err == nil {
			out[name] = n
		}
	}
	return out
}
