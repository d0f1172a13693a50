package spec

import (
	"reflect"
	"strings"
	"testing"
)

const staticBase = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "finite" = %true}}};
        "output_stream_ids" = ["words"];
    };
    "Counter" = {
        "computation_class_name" = "Counter";
        "group_by" = ["key"];
        "input_stream_ids" = ["words"];
        "output_stream_ids" = ["counts"];
        "sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["counts"];
            "parameters" = {"queue_path" = "counts"}}};
    };
};
"streams" = {"words" = {}; "counts" = {}};
`

// TestStaticDiff: tunables and spelled-out defaults are not static
// changes; partition counts, group_by, parameters, processing modes, sink
// identities and streams are, and each is named by its spec path.
func TestStaticDiff(t *testing.T) {
	base := mustParse(t, ParseYSON, staticBase).Static()
	round, err := DecodeStatic(base.Encode())
	if err != nil || !reflect.DeepEqual(round, base) {
		t.Fatalf("Encode/DecodeStatic round trip: %v\n%v\n%v", err, round, base)
	}
	for _, tc := range []struct {
		name string
		from string // replaced in staticBase
		to   string
		want []string // changed paths; none for a tunable change
	}{
		{"tunables", `"group_by" = ["key"];`, `"group_by" = ["key"]; "max_rows_per_batch" = 7; "batch_duration" = "3s"; "output_store_count_limit" = 5; "empty_batch_backoff" = "1ms";`, nil},
		{"dynamic spec", `"streams" = {`, `"dynamic_spec" = {"lease_timeout" = "9s"; "target_state" = "stopped"; "job_restart_backoff" = "2s"}; "streams" = {`, nil},
		{"defaults written out", `"group_by" = ["key"];`, `"group_by" = ["key"]; "partition_count" = 4; "processing_mode" = "exactly_once"; "use_compact_input_messages" = %true;`, nil},
		{"partition count", `"group_by" = ["key"];`, `"group_by" = ["key"]; "partition_count" = 8;`, []string{"computations.Counter.partition_count"}},
		{"source partition_count is ignored", `"output_stream_ids" = ["words"];`, `"output_stream_ids" = ["words"]; "partition_count" = 9;`, nil},
		{"group_by", `"group_by" = ["key"];`, `"group_by" = ["key"; "other"];`, []string{"computations.Counter.group_by"}},
		{"processing mode", `"group_by" = ["key"];`, `"group_by" = ["key"]; "processing_mode" = "at_least_once_consistent";`, []string{"computations.Counter.processing_mode"}},
		{"source parameter", `"finite" = %true`, `"finite" = %false`, []string{"computations.Reader.source_streams.events.parameters.finite"}},
		{"parameter set to its zero value", `"queue_path" = "counts"`, `"queue_path" = "counts"; "compress" = %false`, []string{"computations.Counter.sinks.out.parameters.compress"}},
		{"sink class", `"SyncQueueSink"`, `"AsyncQueueSink"`, []string{"computations.Counter.sinks.out.sink_class_name"}},
		{"dedup table", `"group_by" = ["key"];`, `"group_by" = ["key"]; "use_compact_input_messages" = %false;`, []string{"computations.Counter.use_compact_input_messages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(staticBase, tc.from, tc.to, 1)
			if src == staticBase {
				t.Fatalf("%q not found in the base spec", tc.from)
			}
			next := mustParse(t, ParseYSON, src).Static()
			var got []string
			for _, c := range base.Diff(next) {
				got = append(got, c.Path)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("changed paths %q, want %q (diff %v)", got, tc.want, base.Diff(next))
			}
		})
	}
	// Changes show old → new values; a raw parameter shows its zero value.
	if d := base.Diff(mustParse(t, ParseYSON, strings.Replace(staticBase, `"finite" = %true`, `"finite" = %false`, 1)).Static()); len(d) != 1 || d[0].String() != "computations.Reader.source_streams.events.parameters.finite: true → false" {
		t.Errorf("finite true → false: %v", d)
	}
	// A schema added to a stream is named too.
	removed := mustParse(t, ParseYSON, strings.Replace(staticBase, `"words" = {}; `, `"words" = {"schema" = [{"name" = "key"; "type" = "string"}]}; `, 1)).Static()
	d := base.Diff(removed)
	if len(d) != 1 || d[0].Path != "streams.words.schema" || !strings.Contains(d[0].String(), "(unset) → ") {
		t.Fatalf("schema change: %v", d)
	}
}
