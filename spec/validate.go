package spec

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Validate checks the meaning of the spec and returns every problem found, as
// errors.Join of *Error values sorted by path, or nil. Each message says what
// to change.
//
// REQUIRES: defaults applied — Parse has done it; call SetDefaults on a
// Pipeline built in code. Validate reads p and never changes it.
//
// With resolve == nil only structural checks run: ids are made of
// [A-Za-z0-9_] (stream ids go inside message ids, which use '-' and ':' as
// separators); every referenced stream exists where it must (inputs and
// outputs in streams, sink inputs among the computation's outputs, timer
// watched streams among its input and source streams); every stream has
// exactly one writer; the computation graph has no cycle; key columns are
// well formed (first column uint64 unless experimental_enable_non_uint_key,
// and consistent with input stream schemas); use_compact_input_messages=true is
// not combined with experimental_enable_non_uint_key; enumerations hold known
// values; limits, periods and counts are positive.
//
// With a resolver, which maps a computation_class_name to the Kind of the
// class registered in code (a Transform or SwiftMap class with source streams
// counts as the matching ordered-source kind), Validate also rejects unknown class names and
// checks the kind rules: the ordered-source kinds read exactly one source
// stream and have no input streams, no key and no timers; SwiftMap needs input
// streams and has no sources, no sinks and no timers feeding outputs; Transform
// has no sources; only the Transform family relaxes processing_mode; only
// SwiftMap allows batching with relaxed guarantees.
func (p *Pipeline) Validate(resolve func(className string) (Kind, bool)) error {
	if p == nil {
		return &Error{Msg: "nil pipeline"}
	}
	v := &validator{p: p, resolve: resolve}
	v.run()
	return v.errs.err()
}

type validator struct {
	p       *Pipeline
	resolve func(string) (Kind, bool)
	errs    errorList

	streamIDs []string // sorted ids of p.Streams
}

func (v *validator) add(path, format string, args ...any) { v.errs.add(path, format, args...) }

func (v *validator) run() {
	p := v.p
	v.streamIDs = sortedKeys(p.Streams)
	if len(p.Computations) == 0 {
		v.add("computations", "a pipeline needs at least one computation; add one under computations")
	}
	for _, id := range v.streamIDs {
		path := joinKey("streams", id)
		if !isID(id) {
			v.add(path, "%s", idMessage("stream", id))
		}
		if s := p.Streams[id]; s != nil {
			v.columns(joinKey(path, "schema"), s.Schema)
		}
	}
	for _, name := range sortedKeys(p.ExternalStates) {
		v.externalState(joinKey("external_states", name), name, p.ExternalStates[name])
	}
	for _, id := range sortedKeys(p.Computations) {
		path := joinKey("computations", id)
		if !isID(id) {
			v.add(path, "%s", idMessage("computation", id))
		}
		c := p.Computations[id]
		if c == nil {
			v.add(path, "computation is null; give it a computation_class_name or remove it")
			continue
		}
		v.computation(id, path, c)
	}
	v.writers()
	v.cycles()
	v.dynamic("dynamic_spec", &p.Dynamic)
}

// idMessage explains the id rule for a bad id of the given kind.
func idMessage(what, id string) string {
	return fmt.Sprintf("%s id %q must be non-empty and made of letters, digits and '_' "+
		"(ids are embedded in message ids and table keys, which use '-' and ':' as separators); rename it, e.g. to %q",
		what, id, suggestID(id))
}

// computation checks one computation. path is its location.
func (v *validator) computation(id, path string, c *Computation) {
	p := v.p
	kind, kindKnown := Kind(0), false
	classPath := joinKey(path, "computation_class_name")
	if c.ComputationClassName == "" {
		v.add(classPath, "required; name the computation class registered in code")
	} else if v.resolve != nil {
		k, ok := v.resolve(c.ComputationClassName)
		switch {
		case !ok:
			v.add(classPath, "unknown computation class %q; register a class with this name in code, or fix the name", c.ComputationClassName)
		case !k.Valid():
			v.add(classPath, "the resolver returned an invalid kind (%d) for class %q (a bug in the caller's registry)", int(k), c.ComputationClassName)
		default:
			kind, kindKnown = k, true
			// In weir a class is a Transform or a SwiftMap; whether it reads
			// a source is the spec's choice, as Flow's *OrderedSource
			// classes are the same code fed by a source.
			if len(c.SourceStreams) > 0 {
				switch kind {
				case KindTransform:
					kind = KindTransformOrderedSource
				case KindSwiftMap:
					kind = KindSwiftOrderedSource
				}
			}
		}
	}

	// Input and output streams: internal streams declared in streams.
	inputs := v.streamList(joinKey(path, "input_stream_ids"), c.InputStreamIDs, c, "input")
	outputs := v.streamList(joinKey(path, "output_stream_ids"), c.OutputStreamIDs, c, "output")
	if c.DeadLetterStream != "" && !slices.Contains(c.OutputStreamIDs, c.DeadLetterStream) {
		v.add(joinKey(path, "dead_letter_stream"), "stream %q is not among the computation's output_stream_ids %v; declare the dead-letter stream as an output (and give it a sink or a reader)", c.DeadLetterStream, c.OutputStreamIDs)
	}

	// Source streams.
	for _, sid := range sortedKeys(c.SourceStreams) {
		sp := joinKey(joinKey(path, "source_streams"), sid)
		if !isID(sid) {
			v.add(sp, "%s", idMessage("source stream", sid))
		}
		if _, clash := p.Streams[sid]; clash {
			v.add(sp, "source stream id %q is also the id of a stream in streams; rename one of them so that the two can be told apart", sid)
		}
		src := c.SourceStreams[sid]
		if src == nil {
			v.add(sp, "source is null; give it a source_class_name or remove it")
			continue
		}
		if src.SourceClassName == "" {
			v.add(joinKey(sp, "source_class_name"), "required; name the source class registered in code")
		}
	}

	// Timer streams.
	for _, tid := range sortedKeys(c.TimerStreams) {
		tp := joinKey(joinKey(path, "timer_streams"), tid)
		if !isID(tid) {
			v.add(tp, "%s", idMessage("timer stream", tid))
		}
		if _, clash := p.Streams[tid]; clash {
			v.add(tp, "timer stream id %q is also the id of a stream in streams; rename the timer stream", tid)
		}
		if _, clash := c.SourceStreams[tid]; clash {
			v.add(tp, "timer stream id %q is also a source stream of this computation; rename the timer stream", tid)
		}
		t := c.TimerStreams[tid]
		if t == nil {
			v.add(tp, "timer stream is null; give it a time_type or remove it")
			continue
		}
		switch t.TimeType {
		case EventTime, SystemTime:
		default:
			v.add(joinKey(tp, "time_type"), "must be %q or %q, got %q%s; fix it",
				EventTime, SystemTime, t.TimeType, didYouMean(string(t.TimeType), []string{string(EventTime), string(SystemTime)}))
		}
		seen := map[string]bool{}
		for i, w := range t.Streams {
			wp := joinIndex(joinKey(tp, "streams"), i)
			_, isSource := c.SourceStreams[w]
			_, isTimer := c.TimerStreams[w]
			_, isStream := p.Streams[w]
			switch {
			case seen[w]:
				v.add(wp, "stream %q is listed twice; remove one", w)
			case inputs[w] || isSource:
			case isTimer:
				v.add(wp, "%q is a timer stream; timers watch only the computation's input and source streams (Flow's allow_timer_self_dependency is not supported): remove it", w)
			case isStream:
				v.add(wp, "stream %q is not read by this computation; a timer watches only the computation's input and source streams: add it to input_stream_ids or remove it here", w)
			default:
				cands := append(slices.Clone(c.InputStreamIDs), sortedKeys(c.SourceStreams)...)
				v.add(wp, "%q is neither an input stream nor a source stream of this computation%s; fix the id", w, didYouMean(w, cands))
			}
			seen[w] = true
		}
	}

	// Sinks.
	outputIDs := slices.Clone(c.OutputStreamIDs)
	for _, sid := range sortedKeys(c.Sinks) {
		sp := joinKey(joinKey(path, "sinks"), sid)
		if !isID(sid) {
			v.add(sp, "%s", idMessage("sink", sid))
		}
		s := c.Sinks[sid]
		if s == nil {
			v.add(sp, "sink is null; give it a sink_class_name and input_stream_ids or remove it")
			continue
		}
		if s.SinkClassName == "" {
			v.add(joinKey(sp, "sink_class_name"), "required; name the sink class registered in code")
		}
		ip := joinKey(sp, "input_stream_ids")
		if len(s.InputStreamIDs) == 0 {
			v.add(ip, "a sink needs at least one input stream; list the output streams of computation %q it delivers", id)
		}
		seen := map[string]bool{}
		for i, in := range s.InputStreamIDs {
			ep := joinIndex(ip, i)
			_, isStream := p.Streams[in]
			switch {
			case seen[in]:
				v.add(ep, "stream %q is listed twice; remove one", in)
			case outputs[in]:
			case isStream:
				v.add(ep, "stream %q is not an output of computation %q; a sink delivers its own computation's outputs: add it to output_stream_ids, or move the sink to the stream's writer", in, id)
			default:
				v.add(ep, "%q is not an output stream of computation %q%s; fix the id", in, id, didYouMean(in, outputIDs))
			}
			seen[in] = true
		}
		if a := s.AtMostOnceStrategy; a != nil {
			ap := joinKey(sp, "at_most_once_strategy")
			if a.TotalQueueBytesLimit <= 0 {
				v.add(joinKey(ap, "total_queue_bytes_limit"), "must be a positive number of bytes, got %d", a.TotalQueueBytesLimit)
			}
			if a.SuspendDestructionDuration <= 0 {
				v.add(joinKey(ap, "suspend_destruction_duration"), "must be positive, got %s", a.SuspendDestructionDuration)
			}
		}
	}

	v.key(path, c, inputs)

	if c.UseCompactInputMessages != nil && *c.UseCompactInputMessages && c.ExperimentalEnableNonUintKey {
		v.add(joinKey(path, "use_compact_input_messages"),
			"cannot be true together with experimental_enable_non_uint_key: compact dedup keys are built from the uint64 key hash, "+
				"which a non-uint key does not have; remove use_compact_input_messages (or set it to false), or use a uint64 key")
	}
	switch c.ProcessingMode {
	case ExactlyOnce, AtLeastOnceConsistent:
	default:
		v.add(joinKey(path, "processing_mode"), "must be %q or %q, got %q%s; fix it", ExactlyOnce, AtLeastOnceConsistent, c.ProcessingMode,
			didYouMean(string(c.ProcessingMode), []string{string(ExactlyOnce), string(AtLeastOnceConsistent)}))
	}

	v.bounded(joinKey(path, "partition_count"), int64(c.PartitionCount), MaxPartitionCount, "each partition is a job with its own mailbox and state")
	v.bounded(joinKey(path, "max_rows_per_batch"), int64(c.MaxRowsPerBatch), MaxRowsPerBatch, "an epoch holds its whole batch in memory")
	v.bounded(joinKey(path, "max_bytes_per_batch"), c.MaxBytesPerBatch, MaxBytesPerBatch, "an epoch holds its whole batch in memory")
	v.positive(joinKey(path, "output_store_count_limit"), c.OutputStoreCountLimit)
	v.positive(joinKey(path, "output_store_byte_size_limit"), c.OutputStoreByteSizeLimit)
	v.positive(joinKey(path, "state_cache_byte_size_limit"), c.StateCacheByteSizeLimit)
	v.positive(joinKey(path, "timer_store_count_limit"), c.TimerStoreCountLimit)
	v.positive(joinKey(path, "timer_store_byte_size_limit"), c.TimerStoreByteSizeLimit)
	if c.BatchDuration < 0 {
		v.add(joinKey(path, "batch_duration"), "must not be negative, got %s", c.BatchDuration)
	}
	v.positiveDuration(joinKey(path, "lease_check_period"), c.LeaseCheckPeriod)
	v.positiveDuration(joinKey(path, "empty_batch_backoff"), c.EmptyBatchBackoff)
	// A job posts its status once per epoch, idle ones included, and none
	// while it waits between epochs; the controller restarts a job silent
	// for lost_job_timeout as stuck.
	if lost := v.p.Dynamic.LostJobTimeout; lost > 0 {
		for _, w := range []struct {
			key string
			d   Duration
		}{{"empty_batch_backoff", c.EmptyBatchBackoff}, {"batch_duration", c.BatchDuration}} {
			if w.d >= lost {
				v.add(joinKey(path, w.key), "must be shorter than dynamic_spec.lost_job_timeout (%s), got %s: a job waiting that long between epochs posts no status and is restarted as stuck; shorten it or lengthen lost_job_timeout", lost, w.d)
			}
		}
	}

	if w := c.WatermarkStrategy; w != nil {
		wp := joinKey(path, "watermark_strategy")
		if len(c.SourceStreams) == 0 {
			v.add(wp, "only a source computation (one with source_streams) generates event watermarks; remove watermark_strategy or move it to the source computation")
		}
		if w.OutOfOrdernessBound < 0 {
			v.add(joinKey(wp, "out_of_orderness_bound"), "must not be negative, got %s", w.OutOfOrdernessBound)
		}
		if w.IdlePartitionTimeout < 0 {
			v.add(joinKey(wp, "idle_partition_timeout"), "must not be negative (0 disables it), got %s", w.IdlePartitionTimeout)
		}
	}

	// The kind rules below cover this for the other kinds, with sharper words.
	if len(c.InputStreamIDs) == 0 && len(c.SourceStreams) == 0 && (!kindKnown || kind == KindTransform) {
		v.add(path, "has neither input_stream_ids nor source_streams, so it would never receive a message; give it an input stream or a source")
	}
	v.externalStateLists(path, c, kindKnown && !kind.IsTransformFamily())
	if kindKnown {
		v.kindRules(path, c, kind)
	}
}

// externalState checks one external state table declaration.
func (v *validator) externalState(path, name string, t *ExternalState) {
	if !isID(name) {
		v.add(path, "%s", idMessage("external state table", name))
	}
	if t == nil {
		v.add(path, "external state table is null; give it key_columns or remove it")
		return
	}
	kp := joinKey(path, "key_columns")
	if len(t.KeyColumns) == 0 {
		v.add(kp, "an external state table needs at least one key column; list them in sort order, e.g. [{name=user_hash; type=uint64}]")
	}
	v.columns(kp, t.KeyColumns)
	for i, col := range t.KeyColumns {
		if !keyType(col.Type) {
			v.add(joinKey(joinIndex(kp, i), "type"), "a key column cannot be of type %q, which may hold lists and maps; use a scalar type", col.Type)
		}
	}
	vp := joinKey(path, "value_columns")
	v.columns(vp, t.ValueColumns)
	keys := map[string]bool{}
	for _, col := range t.KeyColumns {
		keys[col.Name] = true
	}
	for i, col := range t.ValueColumns {
		if keys[col.Name] {
			v.add(joinKey(joinIndex(vp, i), "name"), "column %q is also a key column; list it once, under key_columns", col.Name)
		}
	}
}

// externalStateLists checks a computation's external_state_managers and
// external_state_joiners: declared tables, each listed once; swift says
// the computation is of a Swift kind, which may not write.
func (v *validator) externalStateLists(path string, c *Computation, swift bool) {
	seen := map[string]string{}
	check := func(key string, names []string) {
		lp := joinKey(path, key)
		for i, n := range names {
			ep := joinIndex(lp, i)
			if _, ok := v.p.ExternalStates[n]; !ok {
				v.add(ep, "%q is not an external state table%s; declare it under external_states or fix the name", n, didYouMean(n, sortedKeys(v.p.ExternalStates)))
				continue
			}
			if prev, dup := seen[n]; dup {
				v.add(ep, "table %q is already listed in %s; list it once (external_state_managers may also read)", n, prev)
				continue
			}
			seen[n] = key
		}
	}
	check("external_state_managers", c.ExternalStateManagers)
	check("external_state_joiners", c.ExternalStateJoiners)
	if swift && len(c.ExternalStateManagers) > 0 {
		v.add(joinKey(path, "external_state_managers"), "class %q is a Swift computation, which may not write external state: its inputs are deduplicated by watermark only, "+
			"so a redelivered input would apply a write twice; move the writes to a Transform, or list the tables under external_state_joiners to read them", c.ComputationClassName)
	}
}

// streamList checks a list of internal stream ids (input_stream_ids or
// output_stream_ids) and returns the set of ids that exist in streams.
func (v *validator) streamList(path string, ids []string, c *Computation, role string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]bool{}
	for i, sid := range ids {
		ep := joinIndex(path, i)
		if seen[sid] {
			v.add(ep, "stream %q is listed twice; remove one", sid)
			continue
		}
		seen[sid] = true
		if _, ok := v.p.Streams[sid]; ok {
			set[sid] = true
			continue
		}
		_, isSource := c.SourceStreams[sid]
		_, isTimer := c.TimerStreams[sid]
		switch {
		case isSource && role == "input":
			v.add(ep, "%q is a source stream of this computation; source streams are read without being listed in input_stream_ids: remove it", sid)
		case isSource:
			v.add(ep, "%q is a source stream; only streams declared in streams can be %ss: declare a stream and fix the id", sid, role)
		case isTimer:
			v.add(ep, "%q is a timer stream of this computation; timer streams are neither inputs nor outputs: remove it", sid)
		default:
			v.add(ep, "no stream %q in streams%s; declare it under streams or fix the id", sid, didYouMean(sid, v.streamIDs))
		}
	}
	return set
}

// key checks group_by, group_by_schema and their agreement with the schemas
// of the input streams.
func (v *validator) key(path string, c *Computation, inputs map[string]bool) {
	gbPath := joinKey(path, "group_by")
	gsPath := joinKey(path, "group_by_schema")
	seen := map[string]bool{}
	for i, name := range c.GroupBy {
		ep := joinIndex(gbPath, i)
		switch {
		case name == "":
			v.add(ep, "key column name is empty; name the column")
		case seen[name]:
			v.add(ep, "key column %q is listed twice; remove one", name)
		}
		seen[name] = true
	}
	v.columns(gsPath, c.GroupBySchema)
	if len(c.GroupBy) > 0 && len(c.GroupBySchema) > 0 {
		names := make([]string, len(c.GroupBySchema))
		for i, col := range c.GroupBySchema {
			names[i] = col.Name
		}
		if !slices.Equal(names, c.GroupBy) {
			v.add(gbPath, "must list the column names of group_by_schema in the same order (%s); fix one of them, or keep only group_by_schema", quoteList(names))
		}
	}
	for i, col := range c.GroupBySchema {
		if !keyType(col.Type) {
			v.add(joinKey(joinIndex(gsPath, i), "type"), "a key column cannot be of type %q, which may hold lists and maps; use a scalar type", col.Type)
		}
	}
	if len(c.GroupBySchema) > 0 && !c.ExperimentalEnableNonUintKey && c.GroupBySchema[0].Type != TypeUint64 {
		v.add(joinKey(joinIndex(gsPath, 0), "type"),
			"the first key column must be uint64 (the key hash that partitions the computation), got %q; make it uint64, or set experimental_enable_non_uint_key",
			c.GroupBySchema[0].Type)
	}

	// Key columns against the schemas of the input streams that have one.
	keys := c.KeyColumns()
	keyPath := gbPath
	if len(c.GroupBy) == 0 {
		keyPath = gsPath
	}
	var declared map[string]ColumnType
	if len(c.GroupBySchema) > 0 {
		declared = map[string]ColumnType{}
		for _, col := range c.GroupBySchema {
			declared[col.Name] = col.Type
		}
	}
	for _, in := range sortedKeys(inputs) {
		s := v.p.Streams[in]
		if s == nil || len(s.Schema) == 0 {
			continue
		}
		schema := map[string]ColumnType{}
		for _, col := range s.Schema {
			schema[col.Name] = col.Type
		}
		for i, k := range keys {
			if k == "" {
				continue
			}
			ep := joinIndex(keyPath, i)
			t, ok := schema[k]
			switch {
			case !ok:
				v.add(ep, "key column %q is not in the schema of input stream %q; add it to the stream's schema or fix the key", k, in)
			case !keyType(t):
				v.add(ep, "key column %q is of type %q in the schema of input stream %q, which may hold lists and maps; a key column needs a scalar type", k, t, in)
			case declared != nil && declared[k] != t:
				v.add(ep, "key column %q is %s in group_by_schema but %s in the schema of input stream %q; make them agree", k, declared[k], t, in)
			case declared == nil && i == 0 && !c.ExperimentalEnableNonUintKey && t != TypeUint64:
				v.add(ep, "the first key column %q is %s in the schema of input stream %q, but must be uint64 (the key hash that partitions the computation); make it uint64, or set experimental_enable_non_uint_key", k, t, in)
			}
		}
	}
}

// keyType reports whether a column of type t can be a key column: not
// any or yson, whose values may be lists and maps, which have no key
// encoding.
func keyType(t ColumnType) bool { return t != TypeAny && t != "yson" }

// columns checks a schema or key column list.
func (v *validator) columns(path string, cols []Column) {
	seen := map[string]bool{}
	for i, col := range cols {
		cp := joinIndex(path, i)
		switch {
		case col.Name == "":
			v.add(joinKey(cp, "name"), "column name is empty; name the column")
		case seen[col.Name]:
			v.add(joinKey(cp, "name"), "column %q appears twice; rename or remove one", col.Name)
		}
		seen[col.Name] = true
		if !slices.Contains(columnTypes, string(col.Type)) {
			v.add(joinKey(cp, "type"), "unknown column type %q%s; use one of %s", col.Type, didYouMean(string(col.Type), columnTypes), strings.Join(columnTypes, ", "))
		}
	}
}

// kindRules checks what the computation's kind forbids or requires.
func (v *validator) kindRules(path string, c *Computation, kind Kind) {
	class := c.ComputationClassName
	if kind.IsSource() {
		if n := len(c.SourceStreams); n != 1 {
			v.add(joinKey(path, "source_streams"), "class %q is a %s computation, which reads exactly one source stream; it has %d: declare exactly one", class, kind, n)
		}
		if len(c.InputStreamIDs) > 0 {
			v.add(joinKey(path, "input_stream_ids"), "class %q is a %s computation, which reads only its source; remove input_stream_ids, or use a Transform or SwiftMap class", class, kind)
		}
		if len(c.GroupBy) > 0 {
			v.add(joinKey(path, "group_by"), "class %q is a %s computation, which is keyed by its source partition; remove group_by", class, kind)
		}
		if len(c.GroupBySchema) > 0 {
			v.add(joinKey(path, "group_by_schema"), "class %q is a %s computation, which is keyed by its source partition; remove group_by_schema", class, kind)
		}
		if len(c.TimerStreams) > 0 {
			v.add(joinKey(path, "timer_streams"), "class %q is a %s computation, which cannot have timers; move them to a downstream Transform", class, kind)
		}
	}
	switch kind {
	case KindSwiftMap:
		if len(c.InputStreamIDs) == 0 {
			v.add(joinKey(path, "input_stream_ids"), "class %q is a SwiftMap computation, which needs at least one input stream; list the streams it maps", class)
		}
		if len(c.SourceStreams) > 0 {
			v.add(joinKey(path, "source_streams"), "class %q is a SwiftMap computation, which has no sources; read the source with a SwiftOrderedSource class instead", class)
		}
		if len(c.Sinks) > 0 {
			v.add(joinKey(path, "sinks"), "class %q is a SwiftMap computation, which has no sinks (it materializes no outputs to deliver from); attach the sink to a downstream Transform", class)
		}
		if len(c.TimerStreams) > 0 && len(c.OutputStreamIDs) > 0 {
			v.add(joinKey(path, "timer_streams"), "class %q is a SwiftMap computation, whose outputs may not depend on timers (a timer has no parent message to derive a deterministic id from), "+
				"and every output depends on every timer stream; remove timer_streams or output_stream_ids, or use a Transform class", class)
		}
	case KindTransform:
		if len(c.SourceStreams) > 0 {
			v.add(joinKey(path, "source_streams"), "class %q is a Transform computation, which has no sources; read the source with a TransformOrderedSource class instead, or remove source_streams", class)
		}
	}
	if !kind.IsTransformFamily() && c.ProcessingMode != ExactlyOnce {
		v.add(joinKey(path, "processing_mode"), "class %q is a %s computation; only Transform and TransformOrderedSource computations can relax processing_mode: remove it", class, kind)
	}
	if kind != KindSwiftMap && c.AllowBatchingWithRelaxedGuarantees {
		v.add(joinKey(path, "allow_batching_with_relaxed_guarantees"), "class %q is a %s computation; only SwiftMap computations batch with relaxed guarantees: remove it", class, kind)
	}
}

// writers checks that every stream has exactly one writer computation.
func (v *validator) writers() {
	writers := map[string][]string{}
	for _, id := range sortedKeys(v.p.Computations) {
		c := v.p.Computations[id]
		if c == nil {
			continue
		}
		for _, s := range dedup(c.OutputStreamIDs) {
			writers[s] = append(writers[s], id)
		}
	}
	for _, sid := range v.streamIDs {
		path := joinKey("streams", sid)
		switch w := writers[sid]; len(w) {
		case 0:
			v.add(path, "no computation writes this stream; list it in the output_stream_ids of the computation that produces it, or remove it")
		case 1:
		default:
			v.add(path, "written by computations %s, but a stream has exactly one writer; give each computation its own output stream", quoteList(w))
		}
	}
}

// cycles rejects cycles in the computation graph (an edge A→B when B reads a
// stream A writes). weir needs an acyclic graph: a stream's system watermark
// is computed from its upstream, so in a cycle it would never advance, dedup
// rows would never be collected and the pipeline could never drain.
func (v *validator) cycles() {
	ids := sortedKeys(v.p.Computations)
	readers := map[string][]string{} // stream -> computations reading it
	for _, id := range ids {
		if c := v.p.Computations[id]; c != nil {
			for _, s := range dedup(c.InputStreamIDs) {
				readers[s] = append(readers[s], id)
			}
		}
	}
	succ := func(id string) []string {
		var out []string
		if c := v.p.Computations[id]; c != nil {
			for _, s := range dedup(c.OutputStreamIDs) {
				out = append(out, readers[s]...)
			}
		}
		sort.Strings(out)
		return slices.Compact(out)
	}

	// Tarjan's strongly connected components, iterating ids in order so that
	// the result is deterministic.
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next := 0
	var sccs [][]string
	var strong func(id string)
	strong = func(id string) {
		index[id], low[id] = next, next
		next++
		stack = append(stack, id)
		onStack[id] = true
		for _, w := range succ(id) {
			if _, seen := index[w]; !seen {
				strong(w)
				low[id] = min(low[id], low[w])
			} else if onStack[w] {
				low[id] = min(low[id], index[w])
			}
		}
		if low[id] == index[id] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == id {
					break
				}
			}
			sccs = append(sccs, scc)
		}
	}
	for _, id := range ids {
		if _, seen := index[id]; !seen {
			strong(id)
		}
	}

	for _, scc := range sccs {
		members := map[string]bool{}
		for _, id := range scc {
			members[id] = true
		}
		// The streams that run between members of the component.
		var via []string
		for _, id := range scc {
			c := v.p.Computations[id]
			if c == nil {
				continue
			}
			for _, s := range dedup(c.OutputStreamIDs) {
				for _, r := range readers[s] {
					if members[r] {
						via = append(via, s)
						break
					}
				}
			}
		}
		if len(via) == 0 {
			continue // a single computation that does not read its own output
		}
		sort.Strings(scc)
		sort.Strings(via)
		via = slices.Compact(via)
		what := "computations " + quoteList(scc) + " form a cycle"
		if len(scc) == 1 {
			what = "computation reads its own output, a cycle"
		}
		v.add(joinKey("computations", scc[0]),
			"%s through streams %s; weir needs an acyclic graph (a stream's system watermark is computed from its upstream, so in a cycle it never advances and the pipeline cannot drain): remove one of these streams from an input_stream_ids",
			what, quoteList(via))
	}
}

// dynamic checks the dynamic spec.
func (v *validator) dynamic(path string, d *DynamicSpec) {
	switch d.TargetState {
	case StateWorking, StateStopped, StatePaused, StateCompleted:
	default:
		states := []string{string(StateWorking), string(StateStopped), string(StatePaused), string(StateCompleted)}
		v.add(joinKey(path, "target_state"), "must be one of %s, got %q%s; fix it", quoteList(states), d.TargetState, didYouMean(string(d.TargetState), states))
	}
	v.positiveDuration(joinKey(path, "scheduler_period"), d.SchedulerPeriod)
	v.positiveDuration(joinKey(path, "lease_timeout"), d.LeaseTimeout)
	v.positiveDuration(joinKey(path, "lease_ping_period"), d.LeasePingPeriod)
	v.positiveDuration(joinKey(path, "lease_check_period"), d.LeaseCheckPeriod)
	v.positiveDuration(joinKey(path, "lost_job_timeout"), d.LostJobTimeout)
	v.bounded(joinKey(path, "worker_count"), int64(d.WorkerCount), MaxWorkerCount, "each worker runs its jobs' goroutines")
	v.positiveDuration(joinKey(path, "job_restart_backoff"), d.JobRestartBackoff)
	v.positiveDuration(joinKey(path, "rescale_quiesce_timeout"), d.RescaleQuiesceTimeout)
	if d.JobRestartBackoff > 0 && d.JobRestartBackoffMax < d.JobRestartBackoff {
		v.add(joinKey(path, "job_restart_backoff_max"), "must not be shorter than job_restart_backoff (%s), got %s", d.JobRestartBackoff, d.JobRestartBackoffMax)
	}
	if d.LeasePingPeriod > 0 && d.LeaseTimeout > 0 && d.LeasePingPeriod >= d.LeaseTimeout {
		v.add(joinKey(path, "lease_ping_period"), "must be shorter than lease_timeout (%s), got %s, or healthy leases expire between pings; shorten it (a few pings per timeout)", d.LeaseTimeout, d.LeasePingPeriod)
	}
}

// bounded checks 1 <= n <= max; why says what the number sizes.
func (v *validator) bounded(path string, n, max int64, why string) {
	switch {
	case n <= 0:
		v.add(path, "must be positive, got %d", n)
	case n > max:
		v.add(path, "%d is above the limit of %d (%s); use a smaller value", n, max, why)
	}
}

func (v *validator) positive(path string, n int64) {
	if n <= 0 {
		v.add(path, "must be positive, got %d", n)
	}
}

func (v *validator) positiveDuration(path string, d Duration) {
	if d <= 0 {
		v.add(path, "must be positive, got %s", d)
	}
}

// dedup returns ids without repeats, in first-seen order.
func dedup(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
