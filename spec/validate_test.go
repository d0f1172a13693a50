package spec

// These tests prove that Validate reports each rule it enforces at the path
// of the offending key, with a message saying what is wrong, that it collects
// every problem in path order, and that the kind rules run only with a
// resolver.

import (
	"os"
	"strings"
	"testing"
	"time"
)

// basePipeline parses testdata/seed_examples.yson afresh: Reader
// (SwiftOrderedSource) -events-> MyBatcher (SwiftMap) -batches->
// MyComputation (Transform, key hash+user) -counts-> sink my_sink.
func basePipeline(t *testing.T) *Pipeline {
	t.Helper()
	data, err := os.ReadFile("testdata/seed_examples.yson")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseYSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateBaseIsClean(t *testing.T) {
	mustValidate(t, basePipeline(t))
}

func TestValidateErrors(t *testing.T) {
	yes := true
	type P = *Pipeline
	comp := func(p P, id string) *Computation { return p.Computations[id] }
	sink := func(p P) *Sink { return p.Computations["MyComputation"].Sinks["my_sink"] }
	for _, tc := range []struct {
		name     string
		noKind   bool // validate with a nil resolver (structural checks only)
		mutate   func(p P)
		path     string
		contains string
	}{
		// External state.
		{name: "external state without key", mutate: func(p P) { p.ExternalStates = map[string]*ExternalState{"t": {}} }, path: "external_states.t.key_columns", contains: "at least one key column"},
		{name: "external state list key type", mutate: func(p P) {
			p.ExternalStates = map[string]*ExternalState{"t": {KeyColumns: []Column{{Name: "k", Type: TypeAny}}}}
		}, path: "external_states.t.key_columns[0].type", contains: "cannot be of type"},
		{name: "external state value is key", mutate: func(p P) {
			p.ExternalStates = map[string]*ExternalState{"t": {KeyColumns: []Column{{Name: "k", Type: TypeString}}, ValueColumns: []Column{{Name: "k", Type: TypeString}}}}
		}, path: "external_states.t.value_columns[0].name", contains: "also a key column"},
		{name: "undeclared external state", mutate: func(p P) {
			comp(p, "MyComputation").ExternalStateManagers = []string{"nope"}
		}, path: "computations.MyComputation.external_state_managers[0]", contains: "not an external state table"},
		{name: "external state listed twice", mutate: func(p P) {
			p.ExternalStates = map[string]*ExternalState{"t": {KeyColumns: []Column{{Name: "k", Type: TypeString}}}}
			comp(p, "MyComputation").ExternalStateManagers = []string{"t"}
			comp(p, "MyComputation").ExternalStateJoiners = []string{"t"}
		}, path: "computations.MyComputation.external_state_joiners[0]", contains: "already listed"},
		{name: "swift writes external state", mutate: func(p P) {
			p.ExternalStates = map[string]*ExternalState{"t": {KeyColumns: []Column{{Name: "k", Type: TypeString}}}}
			comp(p, "MyBatcher").ExternalStateManagers = []string{"t"}
		}, path: "computations.MyBatcher.external_state_managers", contains: "may not write external state"},
		// Structure.
		{name: "no computations", mutate: func(p P) { p.Computations = nil }, path: "computations", contains: "at least one computation"},
		{name: "null computation", mutate: func(p P) { p.Computations["Nil"] = nil }, path: "computations.Nil", contains: "computation is null"},
		{name: "bad stream id", mutate: func(p P) {
			p.Streams["my-events"] = &Stream{}
			comp(p, "Reader").OutputStreamIDs = append(comp(p, "Reader").OutputStreamIDs, "my-events")
		}, path: "streams.my-events", contains: `rename it, e.g. to "my_events"`},
		{name: "bad computation id", mutate: func(p P) {
			p.Computations["my:comp"] = comp(p, "MyComputation")
			delete(p.Computations, "MyComputation")
		}, path: `computations["my:comp"]`, contains: "made of letters, digits and '_'"},
		{name: "bad sink id", mutate: func(p P) { comp(p, "MyComputation").Sinks["a b"] = sink(p) }, path: `computations.MyComputation.sinks["a b"]`, contains: "sink id"},
		{name: "empty class name", mutate: func(p P) { comp(p, "MyComputation").ComputationClassName = "" }, path: "computations.MyComputation.computation_class_name", contains: "required"},

		// Stream references.
		{name: "unknown input stream", mutate: func(p P) { comp(p, "MyComputation").InputStreamIDs = []string{"batchs"} }, path: "computations.MyComputation.input_stream_ids[0]", contains: `no stream "batchs" in streams (did you mean "batches"?)`},
		{name: "input is own source stream", mutate: func(p P) { comp(p, "Reader").InputStreamIDs = []string{"queue"} }, path: "computations.Reader.input_stream_ids[0]", contains: "source streams are read without being listed"},
		{name: "input listed twice", mutate: func(p P) { comp(p, "MyComputation").InputStreamIDs = []string{"batches", "batches"} }, path: "computations.MyComputation.input_stream_ids[1]", contains: "listed twice"},
		{name: "unknown output stream", mutate: func(p P) { comp(p, "Reader").OutputStreamIDs = []string{"events", "evnts2"} }, path: "computations.Reader.output_stream_ids[1]", contains: "declare it under streams"},
		{name: "output is a timer stream", mutate: func(p P) {
			c := comp(p, "MyComputation")
			c.TimerStreams = map[string]*TimerStream{"tick": {TimeType: SystemTime}}
			c.OutputStreamIDs = append(c.OutputStreamIDs, "tick")
		}, path: "computations.MyComputation.output_stream_ids[1]", contains: "timer streams are neither inputs nor outputs"},
		{name: "two writers", mutate: func(p P) { comp(p, "Reader").OutputStreamIDs = []string{"events", "batches"} }, path: "streams.batches", contains: `written by computations "MyBatcher" and "Reader"`},
		{name: "no writer", mutate: func(p P) { p.Streams["orphan"] = &Stream{} }, path: "streams.orphan", contains: "no computation writes this stream"},
		{name: "source id clashes with a stream", mutate: func(p P) { p.Streams["queue"] = &Stream{} }, path: "computations.Reader.source_streams.queue", contains: "also the id of a stream"},
		{name: "null source", mutate: func(p P) { comp(p, "Reader").SourceStreams["queue"] = nil }, path: "computations.Reader.source_streams.queue", contains: "source is null"},
		{name: "source class missing", mutate: func(p P) { comp(p, "Reader").SourceStreams["queue"].SourceClassName = "" }, path: "computations.Reader.source_streams.queue.source_class_name", contains: "required"},

		// Sinks.
		{name: "sink reads a stream its computation does not write", mutate: func(p P) { sink(p).InputStreamIDs = []string{"batches"} }, path: "computations.MyComputation.sinks.my_sink.input_stream_ids[0]", contains: `not an output of computation "MyComputation"`},
		{name: "sink reads an unknown stream", mutate: func(p P) { sink(p).InputStreamIDs = []string{"cnts"} }, path: "computations.MyComputation.sinks.my_sink.input_stream_ids[0]", contains: `(did you mean "counts"?)`},
		{name: "sink without inputs", mutate: func(p P) { sink(p).InputStreamIDs = nil }, path: "computations.MyComputation.sinks.my_sink.input_stream_ids", contains: "at least one input stream"},
		{name: "sink class missing", mutate: func(p P) { sink(p).SinkClassName = "" }, path: "computations.MyComputation.sinks.my_sink.sink_class_name", contains: "required"},
		{name: "null sink", mutate: func(p P) { comp(p, "MyComputation").Sinks["other"] = nil }, path: "computations.MyComputation.sinks.other", contains: "sink is null"},
		{name: "at-most-once queue limit", mutate: func(p P) { sink(p).AtMostOnceStrategy.TotalQueueBytesLimit = 0 }, path: "computations.MyComputation.sinks.my_sink.at_most_once_strategy.total_queue_bytes_limit", contains: "must be a positive number of bytes, got 0"},
		{name: "at-most-once suspend duration", mutate: func(p P) { sink(p).AtMostOnceStrategy.SuspendDestructionDuration = -1 }, path: "computations.MyComputation.sinks.my_sink.at_most_once_strategy.suspend_destruction_duration", contains: "must be positive"},

		// Timers.
		{name: "timer watches a stream the computation does not read", mutate: func(p P) {
			comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"t": {TimeType: EventTime, Streams: []string{"counts"}}}
		}, path: "computations.MyComputation.timer_streams.t.streams[0]", contains: "not read by this computation"},
		{name: "timer watches an unknown stream", mutate: func(p P) {
			comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"t": {TimeType: EventTime, Streams: []string{"batchez"}}}
		}, path: "computations.MyComputation.timer_streams.t.streams[0]", contains: `(did you mean "batches"?)`},
		{name: "timer watches a timer", mutate: func(p P) {
			comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"a": {TimeType: EventTime}, "b": {TimeType: EventTime, Streams: []string{"a"}}}
		}, path: "computations.MyComputation.timer_streams.b.streams[0]", contains: "is a timer stream"},
		{name: "timer time type", mutate: func(p P) {
			comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"t": {TimeType: "evnt_time"}}
		}, path: "computations.MyComputation.timer_streams.t.time_type", contains: `(did you mean "event_time"?)`},
		{name: "timer id clashes with a stream", mutate: func(p P) {
			comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"events": {TimeType: EventTime}}
		}, path: "computations.MyComputation.timer_streams.events", contains: "also the id of a stream"},
		{name: "null timer", mutate: func(p P) { comp(p, "MyComputation").TimerStreams = map[string]*TimerStream{"t": nil} }, path: "computations.MyComputation.timer_streams.t", contains: "timer stream is null"},

		// Keys and dedup.
		{name: "compact dedup with a non-uint key", mutate: func(p P) {
			c := comp(p, "MyComputation")
			c.ExperimentalEnableNonUintKey = true
			c.UseCompactInputMessages = &yes
		}, path: "computations.MyComputation.use_compact_input_messages", contains: "compact dedup keys are built from the uint64 key hash"},
		{name: "first key column not uint64", mutate: func(p P) {
			c := comp(p, "MyComputation")
			c.GroupBySchema = []Column{{Name: "user", Type: TypeString}}
		}, path: "computations.MyComputation.group_by_schema[0].type", contains: "the first key column must be uint64"},
		{name: "group_by disagrees with group_by_schema", mutate: func(p P) { comp(p, "MyComputation").GroupBy = []string{"user", "hash"} }, path: "computations.MyComputation.group_by", contains: `in the same order ("hash" and "user")`},
		{name: "key column missing from input schema", mutate: func(p P) {
			c := comp(p, "MyComputation")
			c.GroupBySchema = append(c.GroupBySchema, Column{Name: "region", Type: TypeString})
		}, path: "computations.MyComputation.group_by_schema[2]", contains: `key column "region" is not in the schema of input stream "batches"`},
		{name: "key column type disagrees with input schema", mutate: func(p P) {
			comp(p, "MyComputation").GroupBySchema[1].Type = TypeInt64
		}, path: "computations.MyComputation.group_by_schema[1]", contains: "int64 in group_by_schema but string in the schema"},
		{name: "group_by first column not uint64 in input schema", mutate: func(p P) {
			c := comp(p, "MyComputation")
			c.GroupBySchema = nil
			c.GroupBy = []string{"user"}
		}, path: "computations.MyComputation.group_by[0]", contains: `the first key column "user" is string`},
		{name: "empty key column", mutate: func(p P) { comp(p, "MyComputation").GroupBy = []string{"hash", ""} }, path: "computations.MyComputation.group_by[1]", contains: "key column name is empty"},
		{name: "unknown column type", mutate: func(p P) { p.Streams["batches"].Schema[2].Type = "in64" }, path: "streams.batches.schema[2].type", contains: `unknown column type "in64" (did you mean "int64"?)`},
		{name: "duplicate column", mutate: func(p P) { p.Streams["batches"].Schema[2].Name = "user" }, path: "streams.batches.schema[2].name", contains: `column "user" appears twice`},

		// Enumerations and tunables.
		{name: "processing mode value", mutate: func(p P) { comp(p, "MyComputation").ProcessingMode = "at_least_once_consistant" }, path: "computations.MyComputation.processing_mode", contains: `(did you mean "at_least_once_consistent"?)`},
		{name: "partition count", mutate: func(p P) { comp(p, "MyComputation").PartitionCount = 0 }, path: "computations.MyComputation.partition_count", contains: "must be positive, got 0"},
		{name: "max bytes per batch", mutate: func(p P) { comp(p, "MyComputation").MaxBytesPerBatch = -5 }, path: "computations.MyComputation.max_bytes_per_batch", contains: "must be positive, got -5"},
		{name: "batch duration", mutate: func(p P) { comp(p, "MyComputation").BatchDuration = -1 }, path: "computations.MyComputation.batch_duration", contains: "must not be negative"},
		{name: "lease check period", mutate: func(p P) { comp(p, "MyComputation").LeaseCheckPeriod = -1 }, path: "computations.MyComputation.lease_check_period", contains: "must be positive"},
		{name: "output store count limit", mutate: func(p P) { comp(p, "MyComputation").OutputStoreCountLimit = 0 }, path: "computations.MyComputation.output_store_count_limit", contains: "must be positive"},
		{name: "output store byte size limit", mutate: func(p P) { comp(p, "MyComputation").OutputStoreByteSizeLimit = 0 }, path: "computations.MyComputation.output_store_byte_size_limit", contains: "must be positive"},
		{name: "empty batch backoff", mutate: func(p P) { comp(p, "MyComputation").EmptyBatchBackoff = 0 }, path: "computations.MyComputation.empty_batch_backoff", contains: "must be positive"},
		{name: "empty batch backoff past the lost-job timeout", mutate: func(p P) { comp(p, "MyComputation").EmptyBatchBackoff = p.Dynamic.LostJobTimeout },
			path: "computations.MyComputation.empty_batch_backoff", contains: "must be shorter than dynamic_spec.lost_job_timeout (3s), got 3s"},
		{name: "batch duration past the lost-job timeout", mutate: func(p P) { comp(p, "MyComputation").BatchDuration = Duration(time.Minute) },
			path: "computations.MyComputation.batch_duration", contains: "is restarted as stuck"},
		{name: "watermark strategy without a source", mutate: func(p P) {
			comp(p, "MyComputation").WatermarkStrategy = &WatermarkStrategy{OutOfOrdernessBound: Duration(time.Second)}
		}, path: "computations.MyComputation.watermark_strategy", contains: "only a source computation"},
		{name: "negative out-of-orderness bound", mutate: func(p P) {
			comp(p, "Reader").WatermarkStrategy = &WatermarkStrategy{OutOfOrdernessBound: -1}
		}, path: "computations.Reader.watermark_strategy.out_of_orderness_bound", contains: "must not be negative"},
		{name: "negative idle partition timeout", mutate: func(p P) {
			comp(p, "Reader").WatermarkStrategy = &WatermarkStrategy{IdlePartitionTimeout: -1}
		}, path: "computations.Reader.watermark_strategy.idle_partition_timeout", contains: "must not be negative"},
		{name: "target state", mutate: func(p P) { p.Dynamic.TargetState = "runing" }, path: "dynamic_spec.target_state", contains: "must be one of"},
		{name: "lease ping period not shorter than timeout", mutate: func(p P) { p.Dynamic.LeasePingPeriod = p.Dynamic.LeaseTimeout }, path: "dynamic_spec.lease_ping_period", contains: "must be shorter than lease_timeout"},
		{name: "scheduler period", mutate: func(p P) { p.Dynamic.SchedulerPeriod = 0 }, path: "dynamic_spec.scheduler_period", contains: "must be positive"},
		{name: "lost job timeout", mutate: func(p P) { p.Dynamic.LostJobTimeout = 0 }, path: "dynamic_spec.lost_job_timeout", contains: "must be positive"},
		{name: "worker count", mutate: func(p P) { p.Dynamic.WorkerCount = 0 }, path: "dynamic_spec.worker_count", contains: "must be positive, got 0"},
		{name: "dynamic lease check period", mutate: func(p P) { p.Dynamic.LeaseCheckPeriod = 0 }, path: "dynamic_spec.lease_check_period", contains: "must be positive"},
		{name: "dynamic lease timeout", mutate: func(p P) { p.Dynamic.LeaseTimeout = 0 }, path: "dynamic_spec.lease_timeout", contains: "must be positive"},

		// Graph.
		{name: "cycle", mutate: func(p P) { comp(p, "MyBatcher").InputStreamIDs = []string{"events", "counts"} }, path: "computations.MyBatcher", contains: `computations "MyBatcher" and "MyComputation" form a cycle through streams "batches" and "counts"`},
		{name: "self loop", noKind: true, mutate: func(p P) { comp(p, "MyComputation").InputStreamIDs = []string{"batches", "counts"} }, path: "computations.MyComputation", contains: `reads its own output, a cycle through streams "counts"`},
		{name: "never receives a message", noKind: true, mutate: func(p P) { comp(p, "MyComputation").InputStreamIDs = nil }, path: "computations.MyComputation", contains: "would never receive a message"},

		// Kinds (with the resolver).
		{name: "unknown class", mutate: func(p P) { comp(p, "MyComputation").ComputationClassName = "Countr" }, path: "computations.MyComputation.computation_class_name", contains: `unknown computation class "Countr"`},
		{name: "resolver returns an invalid kind", mutate: func(p P) { comp(p, "MyComputation").ComputationClassName = "BadKindClass" }, path: "computations.MyComputation.computation_class_name", contains: "invalid kind"},
		{name: "source kind with two sources", mutate: func(p P) {
			comp(p, "Reader").SourceStreams["queue2"] = &Source{SourceClassName: "QueueSource"}
		}, path: "computations.Reader.source_streams", contains: "reads exactly one source stream; it has 2"},
		{name: "source kind with input streams", mutate: func(p P) { comp(p, "Reader").InputStreamIDs = []string{"counts"} }, path: "computations.Reader.input_stream_ids", contains: "reads only its source"},
		{name: "source kind with group_by", mutate: func(p P) { comp(p, "Reader").GroupBy = []string{"hash"} }, path: "computations.Reader.group_by", contains: "keyed by its source partition"},
		{name: "source kind with group_by_schema", mutate: func(p P) { comp(p, "Reader").GroupBySchema = []Column{{Name: "hash", Type: TypeUint64}} }, path: "computations.Reader.group_by_schema", contains: "keyed by its source partition"},
		{name: "source kind with timers", mutate: func(p P) {
			comp(p, "Reader").TimerStreams = map[string]*TimerStream{"t": {TimeType: EventTime}}
		}, path: "computations.Reader.timer_streams", contains: "cannot have timers"},
		{name: "swift map without inputs", mutate: func(p P) { comp(p, "MyBatcher").InputStreamIDs = nil }, path: "computations.MyBatcher.input_stream_ids", contains: "needs at least one input stream"},
		// A SwiftMap or Transform class with a source stream is an
		// ordered-source computation, which takes no input streams.
		{name: "swift map with a source and inputs", mutate: func(p P) {
			comp(p, "MyBatcher").SourceStreams = map[string]*Source{"q": {SourceClassName: "QueueSource"}}
		}, path: "computations.MyBatcher.input_stream_ids", contains: "SwiftOrderedSource computation, which reads only its source"},
		{name: "swift map with a sink", mutate: func(p P) {
			comp(p, "MyBatcher").Sinks = map[string]*Sink{"k": {SinkClassName: "S", InputStreamIDs: []string{"batches"}}}
		}, path: "computations.MyBatcher.sinks", contains: "SwiftMap computation, which has no sinks"},
		{name: "swift map with timers feeding outputs", mutate: func(p P) {
			comp(p, "MyBatcher").TimerStreams = map[string]*TimerStream{"t": {TimeType: EventTime}}
		}, path: "computations.MyBatcher.timer_streams", contains: "outputs may not depend on timers"},
		{name: "transform with a source and inputs", mutate: func(p P) {
			comp(p, "MyComputation").SourceStreams = map[string]*Source{"q": {SourceClassName: "QueueSource"}}
		}, path: "computations.MyComputation.input_stream_ids", contains: "TransformOrderedSource computation, which reads only its source"},
		{name: "processing mode on a swift computation", mutate: func(p P) { comp(p, "MyBatcher").ProcessingMode = AtLeastOnceConsistent }, path: "computations.MyBatcher.processing_mode", contains: "only Transform and TransformOrderedSource computations can relax processing_mode"},
		{name: "batching on a transform", mutate: func(p P) { comp(p, "MyComputation").AllowBatchingWithRelaxedGuarantees = true }, path: "computations.MyComputation.allow_batching_with_relaxed_guarantees", contains: "only SwiftMap computations batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := basePipeline(t)
			tc.mutate(p)
			var err error
			if tc.noKind {
				err = p.Validate(nil)
			} else {
				err = p.Validate(resolve)
			}
			wantErrorAt(t, err, tc.path, tc.contains)
		})
	}
}

// TestValidateKindRulesNeedResolver checks that Validate(nil) does only the
// structural checks: a kind violation passes without a resolver.
func TestValidateKindRulesNeedResolver(t *testing.T) {
	p := basePipeline(t)
	p.Computations["MyComputation"].AllowBatchingWithRelaxedGuarantees = true
	p.Computations["MyComputation"].ComputationClassName = "NotRegistered"
	if err := p.Validate(nil); err != nil {
		t.Fatalf("Validate(nil) = %v, want nil", err)
	}
	if err := p.Validate(resolve); err == nil {
		t.Fatal("Validate(resolve) = nil, want errors")
	}
}

func TestValidateNonUintKeyAllowed(t *testing.T) {
	p := basePipeline(t)
	c := p.Computations["MyComputation"]
	c.ExperimentalEnableNonUintKey = true
	c.GroupBySchema = []Column{{Name: "user", Type: TypeString}}
	if err := p.Validate(resolve); err != nil {
		t.Fatalf("Validate = %v, want nil", err)
	}
	if c.CompactDedup() {
		t.Error("CompactDedup with a non-uint key = true, want false")
	}
}

// TestValidateCollectsSorted checks that all problems are reported, ordered by
// path, whatever the map iteration order.
func TestValidateCollectsSorted(t *testing.T) {
	var first string
	for i := 0; i < 20; i++ {
		p := basePipeline(t)
		p.Dynamic.WorkerCount = 0
		p.Streams["orphan"] = &Stream{}
		p.Computations["MyComputation"].PartitionCount = -1
		p.Computations["Reader"].SourceStreams["queue"].SourceClassName = ""
		err := p.Validate(resolve)
		if err == nil {
			t.Fatal("want errors")
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != 4 {
			t.Fatalf("want 4 errors, got:\n%v", err)
		}
		for j := 1; j < len(lines); j++ {
			if lines[j-1] > lines[j] {
				t.Fatalf("errors not sorted:\n%v", err)
			}
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("nondeterministic:\n%s\nvs\n%s", first, err)
		}
	}
}

func TestValidateNil(t *testing.T) {
	var p *Pipeline
	if err := p.Validate(nil); err == nil {
		t.Fatal("want an error for a nil pipeline")
	}
}
