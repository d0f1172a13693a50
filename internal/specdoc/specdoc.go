// Package specdoc generates docs/spec.md, the reference of every key a
// pipeline spec takes, from the code that decodes the spec: the keys are
// the ones spec.StructKeys reports (the decoders' own list), the types come
// from the Go fields, the defaults from calling SetDefaults on a fresh
// value, the descriptions from the fields' doc comments, and the ranges
// from the limits Validate and the connectors enforce. TestReference fails
// when docs/spec.md is stale or a key lacks a description or a range; run
// `go test ./internal/specdoc -update` to regenerate it.
package specdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/weir-stream/weir/connector/httpsink"
	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/servicelog"
	"github.com/weir-stream/weir/spec"
)

// Section is one map of the spec: where it sits, which struct decodes it,
// who accepts it and what it is in Flow.
type Section struct {
	Title string
	// Path is where the map sits in a spec.
	Path string
	// Type is the struct the decoders decode it into.
	Type reflect.Type
	// Accepts says which computations or classes take these keys.
	Accepts string
	// Flow names the Flow counterpart.
	Flow string
}

// Sections lists every map of a spec, in the order of docs/spec.md.
func Sections() []Section {
	t := func(v any) reflect.Type { return reflect.TypeOf(v) }
	return []Section{
		{"Pipeline", "(top level)", t(spec.Pipeline{}), "every spec", "pipeline spec"},
		{"Computation", "computations.<id>", t(spec.Computation{}), "every computation (key-specific limits below)", "computation spec (and, for the batching and store knobs, the dynamic computation spec)"},
		{"Source stream", "computations.<id>.source_streams.<id>", t(spec.Source{}), "source computations (a Transform or SwiftMap class fed by a source)", "source stream of a TransformOrderedSource / SwiftOrderedSource computation"},
		{"Sink", "computations.<id>.sinks.<id>", t(spec.Sink{}), "Transform and TransformOrderedSource computations", "sink spec"},
		{"At-most-once strategy", "computations.<id>.sinks.<id>.at_most_once_strategy", t(spec.AtMostOnceStrategy{}), "async sinks that support it (AsyncQueueSink)", "at_most_once_strategy"},
		{"Timer stream", "computations.<id>.timer_streams.<id>", t(spec.TimerStream{}), "Transform computations (SwiftMap: timers only for state)", "timer stream spec"},
		{"Watermark strategy", "computations.<id>.watermark_strategy", t(spec.WatermarkStrategy{}), "source computations", "watermark strategy"},
		{"Stream", "streams.<id>", t(spec.Stream{}), "every internal stream", "stream spec"},
		{"External state table", "external_states.<name>", t(spec.ExternalState{}), "the pipeline: tables computations name in external_state_managers / external_state_joiners", "external state table (IExternalStateManager's dynamic table)"},
		{"Column", "streams.<id>.schema[i], computations.<id>.group_by_schema[i], external_states.<name>.key_columns[i] and value_columns[i]", t(spec.Column{}), "schemas and keys", "table schema column"},
		{"Dynamic spec", "dynamic_spec", t(spec.DynamicSpec{}), "the pipeline (may change while it runs)", "dynamic pipeline spec and controller settings"},
		{"QueueSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = QueueSource)", t(queue.SourceParams{}), "QueueSource", "TQueueSource (YT queue source)"},
		{"Queue sink parameters", "computations.<id>.sinks.<id>.parameters (SyncQueueSink, AsyncQueueSink)", t(queue.SinkParams{}), "SyncQueueSink, AsyncQueueSink (data_dir, producer_path: AsyncQueueSink only)", "TSyncQueueSink / TAsyncQueueSink"},
		{"AsyncHttpSink parameters", "computations.<id>.sinks.<id>.parameters (sink_class_name = AsyncHttpSink)", t(httpsink.Params{}), "AsyncHttpSink", "TAsyncHttpSink (HTTP extension)"},
		{"KafkaSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = KafkaSource)", t(kafka.SourceParams{}), "KafkaSource", "Kafka extension source"},
		{"Kafka sink parameters", "computations.<id>.sinks.<id>.parameters (KafkaSink, AtLeastOnceKafkaSink)", t(kafka.SinkParams{}), "KafkaSink, AtLeastOnceKafkaSink (transactional keys: KafkaSink only)", "TKafkaSink / TAtLeastOnceKafkaSink (Kafka extension)"},
		{"ServiceLogSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = ServiceLogSource)", t(servicelog.Params{}), "ServiceLogSource (read by a Transform only)", "TServiceLogSource"},
		{"Kafka TLS", "<kafka parameters>.tls", t(kafka.TLSParams{}), "every Kafka connector", "TKafkaClient resource"},
		{"Kafka SASL", "<kafka parameters>.sasl", t(kafka.SASLParams{}), "every Kafka connector", "TKafkaClient resource"},
	}
}

// ranges gives the accepted values of the keys that need one (numbers,
// durations, enumerations), by "Owner.key"; the limits are the constants
// Validate and the connectors check.
var ranges = map[string]string{
	"Computation.partition_count":                     fmt.Sprintf("1 … %d (spec.MaxPartitionCount)", spec.MaxPartitionCount),
	"Computation.max_rows_per_batch":                  fmt.Sprintf("1 … %d (spec.MaxRowsPerBatch)", spec.MaxRowsPerBatch),
	"Computation.max_bytes_per_batch":                 fmt.Sprintf("1 … %d (1 GiB, spec.MaxBytesPerBatch)", spec.MaxBytesPerBatch),
	"Computation.batch_duration":                      ">= 0 (0: process what is there at once)",
	"Computation.state_cache_byte_size_limit":         "> 0",
	"Computation.timer_store_count_limit":             "> 0",
	"Computation.timer_store_byte_size_limit":         "> 0",
	"Computation.lease_check_period":                  "> 0",
	"Computation.output_store_count_limit":            "> 0",
	"Computation.output_store_byte_size_limit":        "> 0",
	"Computation.empty_batch_backoff":                 "> 0",
	"Computation.processing_mode":                     "exactly_once, at_least_once_consistent",
	"AtMostOnceStrategy.total_queue_bytes_limit":      "> 0",
	"AtMostOnceStrategy.suspend_destruction_duration": "> 0",
	"TimerStream.time_type":                           "event_time, system_time",
	"WatermarkStrategy.out_of_orderness_bound":        ">= 0",
	"WatermarkStrategy.idle_partition_timeout":        ">= 0 (0: off)",
	"Column.type":                                "int8 … uint64, float, double, boolean, string, utf8, any, yson, null, void, date, datetime, timestamp, interval, json, uuid (key columns: not any or yson)",
	"DynamicSpec.target_state":                   "working, stopped, paused, completed",
	"DynamicSpec.scheduler_period":               "> 0",
	"DynamicSpec.lease_timeout":                  "> lease_ping_period",
	"DynamicSpec.lease_ping_period":              "> 0 and < lease_timeout",
	"DynamicSpec.lease_check_period":             "> 0",
	"DynamicSpec.lost_job_timeout":               "> 0",
	"DynamicSpec.job_restart_backoff":            "> 0",
	"DynamicSpec.job_restart_backoff_max":        ">= job_restart_backoff",
	"DynamicSpec.worker_count":                   fmt.Sprintf("1 … %d (spec.MaxWorkerCount)", spec.MaxWorkerCount),
	"Params.max_idle_connections":                ">= 0",
	"Params.max_redirect_count":                  ">= 0",
	"Params.request_timeout":                     "> 0",
	"Params.attempt_timeout":                     "> 0",
	"Params.retry_initial_delay":                 "> 0",
	"Params.retry_minimum_delay":                 ">= 0",
	"Params.retry_multiplier":                    ">= 1",
	"Params.retry_maximum_delay":                 ">= retry_minimum_delay",
	"Params.retry_jitter_ratio":                  "0 … 1",
	"Params.max_attempt_count":                   ">= 1",
	"SourceParams.update_partition_count_period": ">= 0 (0: off)",
	"SourceParams.partition_filter":              "[begin, end), 0 <= begin < end",
	"SourceParams.malformed_message_policy":      "fail, skip",
	"SourceParams.isolation_level":               "read_committed, read_uncommitted",
	"SourceParams.format":                        "json, raw",
	"SourceParams.poll_timeout":                  "> 0",
	"SinkParams.delivery_guarantee":              "exactly_once, at_least_once",
	"SinkParams.transaction_timeout":             "> 0",
	"SinkParams.max_messages_per_transaction":    "> 0",
	"SinkParams.compression":                     "none, gzip, snappy, lz4, zstd",
	"SASLParams.mechanism":                       "plain, scram-sha-256, scram-sha-512",
	"Params.partition_count":                     "1 … 4096",
	"Params.min_cycle_duration":                  ">= 0 (0: the next cycle at once)",
}

// flowNames gives the Flow counterpart of keys that differ from Flow's, by
// "Owner.key"; "" marks a weir extension. Keys not listed have Flow's name
// and meaning.
var flowNames = map[string]string{
	"Computation.partition_count":                        "", // weir: fixed partitioning; Flow sizes partitions from load
	"Computation.max_rows_per_batch":                     "dynamic computation spec max_rows_per_batch",
	"Computation.max_bytes_per_batch":                    "dynamic computation spec max_bytes_per_batch",
	"Computation.batch_duration":                         "dynamic computation spec batch_duration",
	"Computation.lease_check_period":                     "dynamic computation spec lease_check_period",
	"Computation.output_store_count_limit":               "dynamic computation spec output_store_count_limit",
	"Computation.output_store_byte_size_limit":           "dynamic computation spec output_store_byte_size_limit",
	"Computation.empty_batch_backoff":                    "dynamic computation spec empty_batch_backoff",
	"Computation.processing_mode":                        "parameters.processing_mode (accepted in both places)",
	"Computation.allow_batching_with_relaxed_guarantees": "parameters.allow_batching_with_relaxed_guarantees (accepted in both places)",
	"WatermarkStrategy.idle_partition_timeout":           "",
	"DynamicSpec.lease_timeout":                          "controller lease_timeout",
	"DynamicSpec.lease_ping_period":                      "controller lease_ping_period",
	"DynamicSpec.scheduler_period":                       "controller scheduler_period",
	"DynamicSpec.lost_job_timeout":                       "controller lost_job_timeout",
	"DynamicSpec.worker_count":                           "", // weir: workers of the embedded run
	"SinkParams.data_dir":                                "",
	"SinkParams.compression":                             "",
	"SinkParams.allow_missing_progress_marker":           "",
	"SourceParams.format":                                "",
	"Pipeline.external_states":                           "", // weir: Flow's tables live in Cypress; here they are declared
	"Computation.external_state_managers":                "external_state_managers (a map of manager specs in Flow; here the names of the tables written)",
	"Computation.external_state_joiners":                 "external_state_joiners (here the names of the tables read)",
	"ExternalState.key_columns":                          "the table schema's key columns",
	"ExternalState.value_columns":                        "the table schema's value columns",
	"Params.table":                                       "the service log table's path",
	"Params.partition_count":                             "",
	"Params.min_cycle_duration":                          "",
	"Params.cycle_end_marker":                            "",
}

// appliesTo narrows "Owner.key" to the computations that accept it, as
// Validate's kind rules do.
var appliesTo = map[string]string{
	"Computation.source_streams":                         "source computations only: a Transform or SwiftMap class with one source stream",
	"Computation.input_stream_ids":                       "not source computations",
	"Computation.group_by":                               "not source computations; required by Keyed classes such as Counter",
	"Computation.group_by_schema":                        "not source computations",
	"Computation.timer_streams":                          "not source computations; SwiftMap only without outputs",
	"Computation.sinks":                                  "Transform family only",
	"Computation.processing_mode":                        "Transform family only",
	"Computation.allow_batching_with_relaxed_guarantees": "SwiftMap only",
	"Computation.partition_count":                        "computations reading internal streams; source computations have one partition per source partition",
	"Computation.watermark_strategy":                     "source computations only",
	"Computation.external_state_managers":                "Transform family only",
}

// inherited gives the default of keys whose default comes from elsewhere.
var inherited = map[string]string{
	"Computation.lease_check_period": "dynamic_spec.lease_check_period",
}

// Key is one documented key.
type Key struct {
	Name, Type, Default, Range, Flow, Doc string
	Required                              bool
}

// Keys returns the documented keys of a section, with docs from the Go
// source of the packages under root (the repository).
func Keys(root string, s Section) ([]Key, error) {
	docs, err := fieldDocs(root)
	if err != nil {
		return nil, err
	}
	def := defaults(s.Type)
	var out []Key
	for _, sk := range spec.StructKeys(s.Type) {
		id := sk.Owner.Name() + "." + sk.Name
		k := Key{Name: sk.Name, Type: typeName(sk.Field.Type), Required: sk.Required, Range: ranges[id]}
		k.Doc = docs[sk.Owner.PkgPath()+"."+sk.Owner.Name()+"."+sk.Field.Name]
		if a, ok := appliesTo[id]; ok {
			k.Doc = "(" + a + ") " + k.Doc
		}
		k.Default = defaultOf(def.FieldByIndex(sk.Index), sk)
		if d, ok := inherited[id]; ok {
			k.Default = d
		}
		if f, ok := flowNames[id]; ok {
			k.Flow = f
			if f == "" {
				k.Flow = "— (weir)"
			}
		} else {
			k.Flow = "same"
		}
		out = append(out, k)
	}
	return out, nil
}

// NeedsRange reports whether a key's type needs a documented range.
func NeedsRange(k Key) bool {
	switch k.Type {
	case "integer", "float", "duration":
		return true
	}
	return false
}

// defaults returns a value of t with its defaults set (SetDefaults).
func defaults(t reflect.Type) reflect.Value {
	v := reflect.New(t)
	if d, ok := v.Interface().(spec.Defaulter); ok {
		d.SetDefaults()
	}
	return v.Elem()
}

var durationType = reflect.TypeOf(spec.Duration(0))

func defaultOf(v reflect.Value, sk spec.StructKey) string {
	if sk.Required {
		return "required"
	}
	if v.Type() == durationType {
		if v.Int() == 0 {
			return "—"
		}
		return spec.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Bool:
		return fmt.Sprint(v.Bool())
	case reflect.String:
		if v.String() == "" {
			return "—"
		}
		return fmt.Sprintf("`%s`", v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			return "—"
		}
		return fmt.Sprint(v.Int())
	case reflect.Float32, reflect.Float64:
		return fmt.Sprint(v.Float())
	}
	return "—" // lists, maps and nested structs: their own keys have defaults
}

func typeName(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct && t.Elem() != durationType {
			return t.Elem().Name()
		}
		return typeName(t.Elem())
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Elem())
	case reflect.Struct:
		return t.Name()
	case reflect.Interface:
		return "any"
	}
	return t.String()
}

// fieldDocs maps "pkgpath.Type.Field" to the field's doc comment, for the
// packages whose structs the sections use. A field without a comment that
// directly follows a commented one in the same declaration shares it
// ("CertFile and KeyFile are ...").
func fieldDocs(root string) (map[string]string, error) {
	out := map[string]string{}
	pkgs := map[string]string{}
	for _, s := range Sections() {
		pkgs[s.Type.PkgPath()] = ""
	}
	for path := range pkgs {
		rel := strings.TrimPrefix(path, "github.com/weir-stream/weir/")
		dir := filepath.Join(root, filepath.FromSlash(rel))
		fset := token.NewFileSet()
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return false
				}
				prevDoc, prevLine := "", -10
				for _, fl := range st.Fields.List {
					line := fset.Position(fl.Pos()).Line
					doc := strings.TrimSpace(fl.Doc.Text())
					if doc == "" && line == prevLine+1 {
						doc = prevDoc
					}
					for _, name := range fl.Names {
						out[path+"."+ts.Name.Name+"."+name.Name] = doc
					}
					prevDoc, prevLine = doc, fset.Position(fl.End()).Line
				}
				return false
			})
		}
	}
	return out, nil
}

// Markdown renders docs/spec.md.
func Markdown(root string) (string, error) {
	var b strings.Builder
	b.WriteString(`# Spec reference

Every key of a weir pipeline spec (YSON or YAML), generated from the code
that decodes it by ` + "`internal/specdoc`" + ` — do not edit by hand: change the
doc comment of the Go field and run ` + "`go test ./internal/specdoc -update`" + `.
A test fails when this file is stale or a key lacks a description.

Columns: the key, its type (durations take integer milliseconds or strings
such as ` + "`\"250ms\"`" + `), its default (` + "`required`" + `: must be given; —: empty or
off), the values accepted, and the Flow name it maps to (` + "`same`" + `: Flow's key of
the same name and meaning; — (weir): a weir extension Flow does not have).
Unknown keys are errors with a did-you-mean; see also the limits in
` + "`spec.MaxPartitionCount`" + ` and friends.

`)
	for _, s := range Sections() {
		keys, err := Keys(root, s)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "## %s\n\nWhere: `%s`. Accepted by: %s. Flow: %s.\n\n", s.Title, s.Path, s.Accepts, s.Flow)
		b.WriteString("| Key | Type | Default | Values | Flow | Description |\n|---|---|---|---|---|---|\n")
		for _, k := range keys {
			rng := k.Range
			if rng == "" {
				rng = "any"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Name, k.Type, k.Default, cell(rng), cell(k.Flow), cell(k.Doc))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// cell makes text fit one table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// specKeys lists "Owner.key" for a section's keys.
func specKeys(s Section) []string {
	var out []string
	for _, sk := range spec.StructKeys(s.Type) {
		out = append(out, sk.Owner.Name()+"."+sk.Name)
	}
	return out
}
