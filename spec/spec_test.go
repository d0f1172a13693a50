package spec

// These tests prove that the seed's spec examples parse and validate as the
// seed writes them (YSON map fragments with // comments) and read the same in
// YAML; that decoding is strict (unknown keys and wrong types are errors
// naming their path); that the engine keys Flow reads from parameters are
// lifted consistently; that defaults are applied without hiding explicit
// values; and that a spec written back by yson/yaml Marshal reads back
// unchanged.

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.ytsaurus.tech/yt/go/yson"
	"gopkg.in/yaml.v3"
)

// testClasses stands in for the class registry that lives in code.
var testClasses = map[string]Kind{
	"QueueReader":  KindSwiftOrderedSource,
	"ClickReader":  KindTransformOrderedSource,
	"Batcher":      KindSwiftMap,
	"Counter":      KindTransform,
	"Sessionizer":  KindTransform,
	"BadKindClass": Kind(0),
}

func resolve(name string) (Kind, bool) {
	k, ok := testClasses[name]
	return k, ok
}

func mustParse(t *testing.T, parse func([]byte) (*Pipeline, error), src string) *Pipeline {
	t.Helper()
	p, err := parse([]byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n--- input ---\n%s", err, src)
	}
	return p
}

func mustValidate(t *testing.T, p *Pipeline) {
	t.Helper()
	if err := p.Validate(nil); err != nil {
		t.Fatalf("Validate(nil): %v", err)
	}
	if err := p.Validate(resolve); err != nil {
		t.Fatalf("Validate(resolve): %v", err)
	}
}

// wantErrorAt fails unless err has a line "path: ..." containing msg.
func wantErrorAt(t *testing.T, err error, path, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error at %q containing %q, got nil", path, msg)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, path+": ") && strings.Contains(line, msg) {
			return
		}
	}
	t.Fatalf("want an error at %q containing %q, got:\n%v", path, msg, err)
}

// The seed's example 1, its "..." filled in: processing_mode directly under
// the computation.
const seedExample1YSON = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "QueueReader";
        "source_streams" = { "queue" = { "source_class_name" = "QueueSource"; }; };
        "output_stream_ids" = ["events"];
    };
    "MyComputation" = {
        "processing_mode" = "at_least_once_consistent";
        "computation_class_name" = "Counter";   // ... filled in
        "input_stream_ids" = ["events"];
    };
};
"streams" = { "events" = {}; };
`

const seedExample1YAML = `
computations:
  Reader:
    computation_class_name: QueueReader
    source_streams: {queue: {source_class_name: QueueSource}}
    output_stream_ids: [events]
  MyComputation:
    processing_mode: at_least_once_consistent
    computation_class_name: Counter
    input_stream_ids: [events]
streams: {events: {}}
`

// The seed's example 2: allow_batching_with_relaxed_guarantees in the
// parameters of a SwiftMap computation.
const seedExample2YSON = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "QueueReader";
        "source_streams" = { "queue" = { "source_class_name" = "QueueSource"; }; };
        "output_stream_ids" = ["events"];
    };
    "MyBatcher" = {
        "parameters" = {
            "allow_batching_with_relaxed_guarantees" = %true;
        };
        "computation_class_name" = "Batcher";   // ... filled in
        "input_stream_ids" = ["events"];
        "output_stream_ids" = ["batches"];
    };
};
"streams" = { "events" = {}; "batches" = {}; };
`

const seedExample2YAML = `
computations:
  Reader:
    computation_class_name: QueueReader
    source_streams: {queue: {source_class_name: QueueSource}}
    output_stream_ids: [events]
  MyBatcher:
    parameters:
      allow_batching_with_relaxed_guarantees: true
    computation_class_name: Batcher
    input_stream_ids: [events]
    output_stream_ids: [batches]
streams: {events: {}, batches: {}}
`

// The seed's example 3: at_most_once_strategy on an async sink.
const seedExample3YSON = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "QueueReader";
        "source_streams" = { "queue" = { "source_class_name" = "QueueSource"; }; };
        "output_stream_ids" = ["events"];
    };
    "MyComputation" = {
        "computation_class_name" = "Counter";
        "input_stream_ids" = ["events"];
        "output_stream_ids" = ["counts"];
        "sinks" = {
            "my_sink" = {
                "at_most_once_strategy" = {
                    "enabled" = %true;
                    "total_queue_bytes_limit" = 104857600;  // 100 MB
                    "suspend_destruction_duration" = 60000;   // ms
                };
                "sink_class_name" = "AsyncQueueSink";   // ... filled in
                "input_stream_ids" = ["counts"];
            };
        };
    };
};
"streams" = { "events" = {}; "counts" = {}; };
`

const seedExample3YAML = `
computations:
  Reader:
    computation_class_name: QueueReader
    source_streams: {queue: {source_class_name: QueueSource}}
    output_stream_ids: [events]
  MyComputation:
    computation_class_name: Counter
    input_stream_ids: [events]
    output_stream_ids: [counts]
    sinks:
      my_sink:
        at_most_once_strategy:
          enabled: true
          total_queue_bytes_limit: 104857600  # 100 MB
          suspend_destruction_duration: 60000  # ms
        sink_class_name: AsyncQueueSink
        input_stream_ids: [counts]
streams: {events: {}, counts: {}}
`

func TestSeedExample1ProcessingMode(t *testing.T) {
	p := mustParse(t, ParseYSON, seedExample1YSON)
	mustValidate(t, p)
	if got := p.Computations["MyComputation"].ProcessingMode; got != AtLeastOnceConsistent {
		t.Errorf("ProcessingMode = %q, want %q", got, AtLeastOnceConsistent)
	}
	if got := p.Computations["Reader"].ProcessingMode; got != ExactlyOnce {
		t.Errorf("default ProcessingMode = %q, want %q", got, ExactlyOnce)
	}
	if q := mustParse(t, ParseYAML, seedExample1YAML); !reflect.DeepEqual(p, q) {
		t.Errorf("YSON and YAML differ:\nYSON %#v\nYAML %#v", p, q)
	}
}

func TestSeedExample2AllowBatching(t *testing.T) {
	p := mustParse(t, ParseYSON, seedExample2YSON)
	mustValidate(t, p)
	c := p.Computations["MyBatcher"]
	if !c.AllowBatchingWithRelaxedGuarantees {
		t.Errorf("AllowBatchingWithRelaxedGuarantees = false, want true")
	}
	if c.Parameters != nil {
		t.Errorf("Parameters = %v, want the engine key lifted out (nil)", c.Parameters)
	}
	if q := mustParse(t, ParseYAML, seedExample2YAML); !reflect.DeepEqual(p, q) {
		t.Errorf("YSON and YAML differ:\nYSON %#v\nYAML %#v", p, q)
	}
}

func TestSeedExample3AtMostOnceSink(t *testing.T) {
	p := mustParse(t, ParseYSON, seedExample3YSON)
	mustValidate(t, p)
	got := p.Computations["MyComputation"].Sinks["my_sink"].AtMostOnceStrategy
	want := &AtMostOnceStrategy{Enabled: true, TotalQueueBytesLimit: 104857600, SuspendDestructionDuration: Duration(time.Minute)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AtMostOnceStrategy = %+v, want %+v", got, want)
	}
	if q := mustParse(t, ParseYAML, seedExample3YAML); !reflect.DeepEqual(p, q) {
		t.Errorf("YSON and YAML differ:\nYSON %#v\nYAML %#v", p, q)
	}
}

// TestTestdata parses every spec under testdata, validates it, and checks
// that each YSON file and its YAML twin decode to the same pipeline.
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.y*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	parsed := map[string]*Pipeline{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(data, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		mustValidate(t, p)
		parsed[f] = p
	}
	for f, p := range parsed {
		if !strings.HasSuffix(f, ".yson") {
			continue
		}
		twin := strings.TrimSuffix(f, ".yson") + ".yaml"
		q, ok := parsed[twin]
		if !ok {
			t.Errorf("%s has no YAML twin %s", f, twin)
			continue
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s and %s differ:\n%#v\n%#v", f, twin, p, q)
		}
	}

	// Spot checks of the realistic spec.
	p := parsed[filepath.Join("testdata", "sessions.yson")]
	c := p.Computations["Sessionize"]
	if c.PartitionCount != 8 || c.BatchDuration != Duration(500*time.Millisecond) || c.ProcessingMode != ExactlyOnce {
		t.Errorf("Sessionize tunables = %d %s %q", c.PartitionCount, c.BatchDuration, c.ProcessingMode)
	}
	if c.Parameters["session_gap"] != "30m" || len(c.Parameters) != 1 {
		t.Errorf("Sessionize parameters = %v, want only session_gap", c.Parameters)
	}
	w := p.Computations["ReadClicks"].WatermarkStrategy
	if w.OutOfOrdernessBound != Duration(30*time.Second) || w.IdlePartitionTimeout != Duration(time.Minute) {
		t.Errorf("watermark strategy = %+v", w)
	}
	if p.Dynamic.LeasePingPeriod != Duration(time.Second) || p.Dynamic.WorkerCount != 4 || p.Dynamic.LostJobTimeout != DefaultLostJobTimeout {
		t.Errorf("dynamic spec = %+v", p.Dynamic)
	}
	if got := c.TimerWatchedStreams("session_end"); !reflect.DeepEqual(got, []string{"clicks"}) {
		t.Errorf("TimerWatchedStreams = %v", got)
	}
}

func TestFragmentAndFullMapAgree(t *testing.T) {
	data, err := os.ReadFile("testdata/seed_examples.yson")
	if err != nil {
		t.Fatal(err)
	}
	frag := mustParse(t, ParseYSON, string(data))
	full := mustParse(t, ParseYSON, "{\n"+string(data)+"\n}")
	if !reflect.DeepEqual(frag, full) {
		t.Errorf("fragment and full map differ")
	}
	unquoted := mustParse(t, ParseYSON, `computations = {A = {computation_class_name = Counter; input_stream_ids = [s]}}; streams = {s = {}}`)
	quoted := mustParse(t, ParseYSON, `{"computations" = {"A" = {"computation_class_name" = "Counter"; "input_stream_ids" = ["s"]}}; "streams" = {"s" = {}}}`)
	if !reflect.DeepEqual(unquoted, quoted) {
		t.Errorf("quoted and unquoted keys differ")
	}
}

func TestCommentInsideStringPreserved(t *testing.T) {
	p := mustParse(t, ParseYSON, `
// a comment with "a quote
"computations" = {
    "A" = {   // trailing comment
        "computation_class_name" = "Counter";
        "parameters" = {
            "url" = "http://example.com//path";     // not a comment: inside quotes
            "quoted" = "he said \"// hi\" // still the string";
            "backslash" = "ends with \\"; // a real comment "with a quote
            "slashes" = "//";
        };
    };
};`)
	params := p.Computations["A"].Parameters
	want := map[string]any{
		"url":       "http://example.com//path",
		"quoted":    `he said "// hi" // still the string`,
		"backslash": `ends with \`,
		"slashes":   "//",
	}
	if !reflect.DeepEqual(params, want) {
		t.Errorf("parameters = %#v\nwant %#v", params, want)
	}
}

func TestStripYSONCommentsKeepsOffsets(t *testing.T) {
	in := "a = 1; // x\n\"b//\" = 2; //\n"
	out := stripYSONComments([]byte(in))
	if len(out) != len(in) || strings.Count(string(out), "\n") != 2 {
		t.Fatalf("offsets changed: %q", out)
	}
	if string(out) != "a = 1;     \n\"b//\" = 2;   \n" {
		t.Errorf("got %q", out)
	}
	// Binary YSON has no comments and is left alone.
	bin := []byte{'{', 0x01, 0x04, '/', '/', '=', 0x05, '}'}
	if got := stripYSONComments(bin); string(got) != string(bin) {
		t.Errorf("binary input changed: %q", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	const base = `"streams" = {"s" = {}}; "computations" = {"C" = {"computation_class_name" = "Counter"; "input_stream_ids" = ["s"]; %s}};`
	for _, tc := range []struct {
		name, field, path, msg string
	}{
		{"misspelled key", `"processing_mod" = "exactly_once"`, "computations.C.processing_mod", `unknown key (did you mean "processing_mode"?)`},
		{"unknown key lists valid keys", `"zzz" = 1`, "computations.C.zzz", "valid keys here: allow_batching_with_relaxed_guarantees"},
		{"flow-only key", `"streams_dependency" = {}`, "computations.C.streams_dependency", "Flow setting that weir does not support"},
		{"misplaced key", `"at_most_once_strategy" = {}`, "computations.C.at_most_once_strategy", "belongs in a sink"},
		{"nested unknown key", `"sinks" = {"k" = {"sink_class_name" = "S"; "at_most_once_strategy" = {"enabld" = %true}}}`, "computations.C.sinks.k.at_most_once_strategy.enabld", `did you mean "enabled"`},
		{"list expected", `"output_stream_ids" = "s"`, "computations.C.output_stream_ids", `expected a list, got a string ("s")`},
		{"string expected in list", `"group_by" = ["a"; 5]`, "computations.C.group_by[1]", "expected a string, got an integer (5)"},
		{"map expected", `"group_by_schema" = ["hash"]`, "computations.C.group_by_schema[0]", "expected a map"},
		{"boolean expected", `"experimental_enable_non_uint_key" = "true"`, "computations.C.experimental_enable_non_uint_key", "expected a boolean"},
		{"integer expected", `"partition_count" = "4"`, "computations.C.partition_count", "expected an integer"},
		{"float is not an integer", `"max_rows_per_batch" = 1.5`, "computations.C.max_rows_per_batch", "expected an integer, got a float (1.5)"},
		{"integer out of range", `"partition_count" = 18446744073709551615u`, "computations.C.partition_count", "out of range"},
		{"bad duration string", `"batch_duration" = "1 sec"`, "computations.C.batch_duration", "expected a duration"},
		{"bad duration type", `"batch_duration" = %true`, "computations.C.batch_duration", "expected a duration (integer milliseconds"},
		{"required class", `"sinks" = {"k" = {"input_stream_ids" = ["s"]}}`, "computations.C.sinks.k.sink_class_name", "required key is missing"},
		{"processing_mode in both places", `"processing_mode" = "exactly_once"; "parameters" = {"processing_mode" = "at_least_once_consistent"}`, "computations.C.processing_mode", "keep one of them"},
		{"processing_mode parameter type", `"parameters" = {"processing_mode" = 1}`, "computations.C.parameters.processing_mode", "expected a string"},
		{"batching in both places", `"allow_batching_with_relaxed_guarantees" = %false; "parameters" = {"allow_batching_with_relaxed_guarantees" = %true}`, "computations.C.allow_batching_with_relaxed_guarantees", "keep one of them"},
		{"at-most-once in both places", `"sinks" = {"k" = {"sink_class_name" = "S"; "at_most_once_strategy" = {"enabled" = %true}; "parameters" = {"at_most_once_strategy" = {"enabled" = %false}}}}`, "computations.C.sinks.k.at_most_once_strategy", "keep one of them"},
		{"at-most-once in parameters, bad key", `"sinks" = {"k" = {"sink_class_name" = "S"; "parameters" = {"at_most_once_strategy" = {"limit" = 1}}}}`, "computations.C.sinks.k.parameters.at_most_once_strategy.limit", "unknown key"},
		{"duplicate key", `"partition_count" = 1; "partition_count" = 2`, "computations.C.partition_count", "duplicate key"},
		{"attributes", `"partition_count" = <a=b>1`, "computations.C.partition_count", "YSON attributes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, "%s", tc.field, 1)
			_, err := ParseYSON([]byte(src))
			wantErrorAt(t, err, tc.path, tc.msg)
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %v is not a *spec.Error", err)
			}
		})
	}
}

func TestDecodeErrorsYAML(t *testing.T) {
	for _, tc := range []struct {
		name, src, path, msg string
	}{
		{"misspelled top-level key", "streems: {}\n", "streems", `did you mean "streams"`},
		{"wrong type", "computations: [a]\n", "computations", "expected a map, got a list"},
		{"misspelled computation key", "computations:\n  MyComputation:\n    processing_mod: exactly_once\n", "computations.MyComputation.processing_mod", `unknown key (did you mean "processing_mode"?)`},
		{"duration", "dynamic_spec: {lease_timeout: 5 seconds}\n", "dynamic_spec.lease_timeout", "expected a duration"},
		{"key needing quotes in the path", "streams: {\"a.b\": {scheme: []}}\n", `streams["a.b"].scheme`, `did you mean "schema"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseYAML([]byte(tc.src))
			wantErrorAt(t, err, tc.path, tc.msg)
		})
	}
	for _, tc := range []struct{ name, src, msg string }{
		{"syntax", "computations: [\n", "YAML syntax error"},
		{"duplicate key", "streams: {}\nstreams: {}\n", "already defined"},
		{"two documents", "streams: {}\n---\nstreams: {}\n", "more than one YAML document"},
		{"not a map", "- a\n", "the document must be a map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseYAML([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

// TestDecodeCollectsAllErrors checks that decoding reports every problem,
// sorted by path, rather than stopping at the first.
func TestDecodeCollectsAllErrors(t *testing.T) {
	_, err := ParseYSON([]byte(`
"streams" = {"z" = {"schemaa" = []}};
"computations" = {"B" = {"computation_class_nam" = "X"}; "A" = {"partition_count" = "x"}};
"dynamic_spec" = {"worker_count" = %true};
`))
	if err == nil {
		t.Fatal("want errors")
	}
	var paths []string
	for _, line := range strings.Split(err.Error(), "\n") {
		paths = append(paths, line[:strings.Index(line, ": ")])
	}
	want := []string{
		"computations.A.computation_class_name",
		"computations.A.partition_count",
		"computations.B.computation_class_nam",
		"computations.B.computation_class_name",
		"dynamic_spec.worker_count",
		"streams.z.schemaa",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths = %q\nwant %q\nerror:\n%v", paths, want, err)
	}
	if u, ok := err.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != len(want) {
		t.Errorf("error does not unwrap into %d errors", len(want))
	}
}

func TestYSONSyntaxErrorPosition(t *testing.T) {
	_, err := ParseYSON([]byte("\"computations\" = {\n  \"A\" = {\n    \"x\" == 1;\n  };\n};\n"))
	if err == nil || !strings.Contains(err.Error(), "YSON syntax error at line 3, column 10") {
		t.Fatalf("got %v, want a syntax error at line 3, column 10", err)
	}
	_, err = ParseYSON([]byte("{\"computations\" = {};\n  ]\n}"))
	if err == nil || !strings.Contains(err.Error(), "line 2, column 3") {
		t.Fatalf("got %v, want a syntax error at line 2, column 3", err)
	}
	_, err = ParseYSON([]byte(`"computations" = {`))
	if err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("got %v, want a syntax error", err)
	}
}

func TestDurationForms(t *testing.T) {
	for _, tc := range []struct {
		ysonValue, yamlValue string
		want                 time.Duration
	}{
		{"60000", "60000", time.Minute},
		{"60000u", "60000", time.Minute},
		{`"250ms"`, "250ms", 250 * time.Millisecond},
		{`"1m30s"`, `"1m30s"`, 90 * time.Second},
		{"0", "0", 0},
	} {
		p := mustParse(t, ParseYSON, `"dynamic_spec" = {"lost_job_timeout" = `+tc.ysonValue+`}`)
		if got := p.Dynamic.LostJobTimeout.Std(); got != tc.want {
			t.Errorf("YSON %s: got %v, want %v", tc.ysonValue, got, tc.want)
		}
		q := mustParse(t, ParseYAML, "dynamic_spec: {lost_job_timeout: "+tc.yamlValue+"}\n")
		if got := q.Dynamic.LostJobTimeout.Std(); got != tc.want {
			t.Errorf("YAML %s: got %v, want %v", tc.yamlValue, got, tc.want)
		}
	}
	for _, bad := range []string{`"soon"`, "1.5", "%true", "[1]", "9223372036854775807"} {
		_, err := ParseYSON([]byte(`"dynamic_spec" = {"lost_job_timeout" = ` + bad + `}`))
		wantErrorAt(t, err, "dynamic_spec.lost_job_timeout", "duration")
	}
}

func TestDefaults(t *testing.T) {
	p := mustParse(t, ParseYSON, `"computations" = {"C" = {"computation_class_name" = "Counter";
		"timer_streams" = {"t" = {}}; "sinks" = {"k" = {"sink_class_name" = "S"; "at_most_once_strategy" = {}}};
		"watermark_strategy" = {}}}`)
	c := p.Computations["C"]
	want := Computation{
		ComputationClassName:     "Counter",
		ProcessingMode:           ExactlyOnce,
		TimerStreams:             map[string]*TimerStream{"t": {TimeType: EventTime}},
		Sinks:                    map[string]*Sink{"k": {SinkClassName: "S", AtMostOnceStrategy: &AtMostOnceStrategy{TotalQueueBytesLimit: 100 << 20, SuspendDestructionDuration: Duration(10 * time.Second)}}},
		WatermarkStrategy:        &WatermarkStrategy{OutOfOrdernessBound: Duration(time.Minute)},
		PartitionCount:           4,
		MaxRowsPerBatch:          1000,
		MaxBytesPerBatch:         10 << 20,
		LeaseCheckPeriod:         Duration(2 * time.Second), // inherited from dynamic_spec
		OutputStoreCountLimit:    100_000,
		OutputStoreByteSizeLimit: 256 << 20,
		EmptyBatchBackoff:        Duration(250 * time.Millisecond),
		StateCacheByteSizeLimit:  16 << 20,
		TimerStoreCountLimit:     250_000,
		TimerStoreByteSizeLimit:  100 << 20,
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("computation defaults:\n got %+v\nwant %+v", *c, want)
	}
	wantDyn := DynamicSpec{TargetState: StateWorking, SchedulerPeriod: Duration(200 * time.Millisecond), LeaseTimeout: Duration(5 * time.Second),
		LeasePingPeriod: Duration(time.Second), LeaseCheckPeriod: Duration(2 * time.Second), LostJobTimeout: Duration(3 * time.Second), WorkerCount: 2,
		JobRestartBackoff: Duration(time.Second), JobRestartBackoffMax: Duration(30 * time.Second), RescaleQuiesceTimeout: Duration(10 * time.Second)}
	if p.Dynamic != wantDyn {
		t.Errorf("dynamic defaults:\n got %+v\nwant %+v", p.Dynamic, wantDyn)
	}

	// lease_check_period: inherited from dynamic_spec unless set.
	p = mustParse(t, ParseYSON, `"dynamic_spec" = {"lease_check_period" = "3s"};
		"computations" = {"A" = {"computation_class_name" = "X"}; "B" = {"computation_class_name" = "X"; "lease_check_period" = "7s"}}`)
	if a, b := p.Computations["A"].LeaseCheckPeriod, p.Computations["B"].LeaseCheckPeriod; a != Duration(3*time.Second) || b != Duration(7*time.Second) {
		t.Errorf("lease_check_period A=%s B=%s, want 3s and 7s", a, b)
	}

	// An explicit zero is kept (and rejected by Validate), not replaced by the default.
	p = mustParse(t, ParseYSON, `"streams" = {"s" = {}}; "computations" = {"C" = {"computation_class_name" = "X"; "input_stream_ids" = ["s"]; "max_rows_per_batch" = 0}}`)
	if got := p.Computations["C"].MaxRowsPerBatch; got != 0 {
		t.Fatalf("explicit zero replaced by %d", got)
	}
	wantErrorAt(t, p.Validate(nil), "computations.C.max_rows_per_batch", "must be positive, got 0")

	// SetDefaults on a pipeline built in code gives the same result as Parse.
	built := &Pipeline{Computations: map[string]*Computation{"C": {ComputationClassName: "Counter",
		TimerStreams: map[string]*TimerStream{"t": {}}, Sinks: map[string]*Sink{"k": {SinkClassName: "S", AtMostOnceStrategy: &AtMostOnceStrategy{}}},
		WatermarkStrategy: &WatermarkStrategy{}}}}
	built.SetDefaults()
	if !reflect.DeepEqual(*built.Computations["C"], want) || built.Dynamic != wantDyn {
		t.Errorf("SetDefaults:\n got %+v\nwant %+v", *built.Computations["C"], want)
	}
}

func TestCompactDedup(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		use     *bool
		nonUint bool
		want    bool
	}{
		{nil, false, true},
		{nil, true, false},
		{&no, false, false},
		{&yes, false, true},
		{&no, true, false},
		{&yes, true, true}, // rejected by Validate
	} {
		c := &Computation{UseCompactInputMessages: tc.use, ExperimentalEnableNonUintKey: tc.nonUint}
		if got := c.CompactDedup(); got != tc.want {
			t.Errorf("use=%v nonUint=%v: CompactDedup = %v, want %v", tc.use, tc.nonUint, got, tc.want)
		}
	}
}

func TestParseChoosesFormat(t *testing.T) {
	ysonData, err := os.ReadFile("testdata/seed_examples.yson")
	if err != nil {
		t.Fatal(err)
	}
	yamlData, err := os.ReadFile("testdata/seed_examples.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := mustParse(t, ParseYSON, string(ysonData))
	for _, tc := range []struct {
		data []byte
		name string
	}{
		{ysonData, "p.yson"}, {ysonData, "P.YSON"}, {ysonData, "pipeline"}, {ysonData, "p.spec"},
		{yamlData, "p.yaml"}, {yamlData, "p.yml"}, {yamlData, "pipeline"},
	} {
		p, err := Parse(tc.data, tc.name)
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("Parse(%s) differs", tc.name)
		}
	}
	// A YAML file named .yson is read as YSON, and the error names the file.
	if _, err := Parse(yamlData, "p.yson"); err == nil || !strings.Contains(err.Error(), "spec p.yson: YSON syntax error") {
		t.Errorf("got %v", err)
	}
	if _, err := Parse([]byte("a: [\n"), "p"); err == nil || !strings.Contains(err.Error(), "neither YSON nor YAML") {
		t.Errorf("got %v", err)
	}
	// Several problems: counted, one per line after the file name.
	_, err = Parse([]byte(`"streams" = {"s" = {"x" = 1; "y" = 2}}`), "two.yson")
	if err == nil || !strings.HasPrefix(err.Error(), "spec two.yson: 2 problems:\nstreams.s.x: unknown key") {
		t.Errorf("got %v", err)
	}
	// Decoding errors of a sniffed file are reported as they are.
	if _, err := Parse([]byte(`"streams" = {"s" = {"x" = 1}}`), "p"); err == nil || !strings.Contains(err.Error(), "streams.s.x: unknown key") {
		t.Errorf("got %v", err)
	}
}

func TestEmptyDocuments(t *testing.T) {
	for _, src := range []string{"", "  \n// only a comment\n", "{}"} {
		p := mustParse(t, ParseYSON, src)
		wantErrorAt(t, p.Validate(nil), "computations", "at least one computation")
	}
	for _, src := range []string{"", "# only a comment\n", "{}"} {
		p := mustParse(t, ParseYAML, src)
		wantErrorAt(t, p.Validate(nil), "computations", "at least one computation")
	}
}

// TestMarshalRoundTrip checks that a pipeline written with package yson or
// yaml.v3 reads back unchanged, so the engine can store specs.
func TestMarshalRoundTrip(t *testing.T) {
	for _, f := range []string{"testdata/seed_examples.yson", "testdata/sessions.yson"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := mustParse(t, ParseYSON, string(data))

		y, err := yson.MarshalFormat(p, yson.FormatPretty)
		if err != nil {
			t.Fatalf("yson.Marshal: %v", err)
		}
		if q := mustParse(t, ParseYSON, string(y)); !reflect.DeepEqual(p, q) {
			t.Errorf("%s: YSON round trip differs:\n%s", f, y)
		}

		m, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("yaml.Marshal: %v", err)
		}
		if q := mustParse(t, ParseYAML, string(m)); !reflect.DeepEqual(p, q) {
			t.Errorf("%s: YAML round trip differs:\n%s", f, m)
		}

		// The library decoders agree with ours on the typed fields (Duration
		// in particular).
		var viaYSON Pipeline
		if err := yson.Unmarshal(y, &viaYSON); err != nil {
			t.Fatalf("yson.Unmarshal: %v", err)
		}
		if !reflect.DeepEqual(viaYSON.Dynamic, p.Dynamic) {
			t.Errorf("yson.Unmarshal dynamic spec %+v, want %+v", viaYSON.Dynamic, p.Dynamic)
		}
		var viaYAML Pipeline
		if err := yaml.Unmarshal(m, &viaYAML); err != nil {
			t.Fatalf("yaml.Unmarshal: %v", err)
		}
		if !reflect.DeepEqual(viaYAML.Dynamic, p.Dynamic) {
			t.Errorf("yaml.Unmarshal dynamic spec %+v, want %+v", viaYAML.Dynamic, p.Dynamic)
		}
	}
}

// TestTagsAgree checks that every spec struct field has the same key in its
// yson and yaml tags, so both formats read the same names.
func TestTagsAgree(t *testing.T) {
	for _, v := range []any{Pipeline{}, Computation{}, Stream{}, Column{}, Source{}, Sink{}, AtMostOnceStrategy{}, TimerStream{}, WatermarkStrategy{}, DynamicSpec{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			ys := strings.Split(f.Tag.Get("yson"), ",")[0]
			ym := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if ys == "" || ys != ym {
				t.Errorf("%s.%s: yson key %q, yaml key %q", rt.Name(), f.Name, ys, ym)
			}
			if strings.ToLower(ys) != ys {
				t.Errorf("%s.%s: key %q is not snake_case", rt.Name(), f.Name, ys)
			}
		}
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		k                         Kind
		name                      string
		source, swift, transforms bool
	}{
		{KindTransform, "Transform", false, false, true},
		{KindSwiftMap, "SwiftMap", false, true, false},
		{KindTransformOrderedSource, "TransformOrderedSource", true, false, true},
		{KindSwiftOrderedSource, "SwiftOrderedSource", true, true, false},
	} {
		if tc.k.String() != tc.name || tc.k.IsSource() != tc.source || tc.k.IsSwift() != tc.swift || tc.k.IsTransformFamily() != tc.transforms || !tc.k.Valid() {
			t.Errorf("%v: wrong predicates", tc.k)
		}
	}
	if Kind(0).Valid() || Kind(5).Valid() {
		t.Error("invalid kinds report Valid")
	}
}

func TestDidYouMean(t *testing.T) {
	keys := []string{"processing_mode", "parameters", "partition_count"}
	for _, tc := range []struct{ got, want string }{
		{"processing_mod", "processing_mode"},
		{"paramters", "parameters"},
		{"Partition_Count", "partition_count"},
		{"xyz", ""},
		{strings.Repeat("a", 1000), ""},
	} {
		got := didYouMean(tc.got, keys)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, `"`+tc.want+`"`) {
			t.Errorf("didYouMean(%q) = %q, want %q", tc.got, got, tc.want)
		}
	}
}

// TestNullEntries checks that a null map entry declares an entry with its
// defaults (YAML's `streams: {events: }`), while a null optional field stays
// unset.
func TestNullEntries(t *testing.T) {
	y := mustParse(t, ParseYAML, "streams: {events: }\ncomputations: {C: {computation_class_name: X, watermark_strategy: ~, use_compact_input_messages: null, timer_streams: {t: }}}\n")
	s := mustParse(t, ParseYSON, `"streams" = {"events" = #}; "computations" = {"C" = {"computation_class_name" = "X"; "watermark_strategy" = #; "use_compact_input_messages" = #; "timer_streams" = {"t" = #}}}`)
	for _, p := range []*Pipeline{y, s} {
		if st, ok := p.Streams["events"]; !ok || st == nil {
			t.Errorf("streams.events = %v, want an empty stream", st)
		}
		c := p.Computations["C"]
		if c.WatermarkStrategy != nil || c.UseCompactInputMessages != nil {
			t.Errorf("null optional fields set: %+v %v", c.WatermarkStrategy, c.UseCompactInputMessages)
		}
		if ts := c.TimerStreams["t"]; ts == nil || ts.TimeType != EventTime {
			t.Errorf("timer_streams.t = %+v, want defaults", ts)
		}
	}
	if !reflect.DeepEqual(y, s) {
		t.Error("YAML and YSON differ")
	}
}
