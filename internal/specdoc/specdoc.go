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
	"path"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/httpsink"
	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/servicelog"
	"github.com/weir-stream/weir/connector/statictable"
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
	// Unmapped: the keys were not compared with Flow's one by one (the
	// Flow column says so rather than claim "same").
	Unmapped bool
	// Classes are the connector classes whose parameters the section
	// documents (TestEveryConnectorDocumented: every registered class is
	// in one section).
	Classes []string
}

// Sections lists every map of a spec, in the order of docs/spec.md.
func Sections() []Section {
	t := func(v any) reflect.Type { return reflect.TypeOf(v) }
	return []Section{
		{"Pipeline", "(top level)", t(spec.Pipeline{}), "every spec", "pipeline spec", false, nil},
		{"Computation", "computations.<id>", t(spec.Computation{}), "every computation (key-specific limits below)", "computation spec (and, for the batching and store knobs, the dynamic computation spec)", false, nil},
		{"Source stream", "computations.<id>.source_streams.<id>", t(spec.Source{}), "source computations (a Transform or SwiftMap class fed by a source)", "source stream of a TransformOrderedSource / SwiftOrderedSource computation", false, nil},
		{"Sink", "computations.<id>.sinks.<id>", t(spec.Sink{}), "Transform and TransformOrderedSource computations", "sink spec", false, nil},
		{"At-most-once strategy", "computations.<id>.sinks.<id>.at_most_once_strategy", t(spec.AtMostOnceStrategy{}), "sinks that support it (AsyncQueueSink, AtMostOnceClickHouseSink); the other sinks refuse it when enabled", "at_most_once_strategy", false, nil},
		{"Timer stream", "computations.<id>.timer_streams.<id>", t(spec.TimerStream{}), "Transform computations (SwiftMap: timers only for state)", "timer stream spec", false, nil},
		{"Watermark strategy", "computations.<id>.watermark_strategy", t(spec.WatermarkStrategy{}), "source computations", "watermark strategy", false, nil},
		{"Stream", "streams.<id>", t(spec.Stream{}), "every internal stream", "stream spec", false, nil},
		{"External state table", "external_states.<name>", t(spec.ExternalState{}), "the pipeline: tables computations name in external_state_managers / external_state_joiners", "external state table (IExternalStateManager's dynamic table)", false, nil},
		{"Column", "streams.<id>.schema[i], computations.<id>.group_by_schema[i], external_states.<name>.key_columns[i] and value_columns[i]", t(spec.Column{}), "schemas and keys", "table schema column", false, nil},
		{"Dynamic spec", "dynamic_spec", t(spec.DynamicSpec{}), "the pipeline (may change while it runs)", "dynamic pipeline spec and controller settings", false, nil},
		{"QueueSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = QueueSource)", t(queue.SourceParams{}), "QueueSource", "TQueueSource (YT queue source)", false, []string{"QueueSource"}},
		{"Queue sink parameters", "computations.<id>.sinks.<id>.parameters (SyncQueueSink, AsyncQueueSink)", t(queue.SinkParams{}), "SyncQueueSink, AsyncQueueSink (data_dir, producer_path: AsyncQueueSink only)", "TSyncQueueSink / TAsyncQueueSink", false, []string{"SyncQueueSink", "AsyncQueueSink"}},
		{"AsyncHttpSink parameters", "computations.<id>.sinks.<id>.parameters (sink_class_name = AsyncHttpSink)", t(httpsink.Params{}), "AsyncHttpSink", "TAsyncHttpSink (HTTP extension)", false, []string{httpsink.ClassName}},
		{"KafkaSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = KafkaSource)", t(kafka.SourceParams{}), "KafkaSource", "Kafka extension source", false, []string{kafka.SourceClassName}},
		{"Kafka sink parameters", "computations.<id>.sinks.<id>.parameters (KafkaSink, AtLeastOnceKafkaSink)", t(kafka.SinkParams{}), "KafkaSink, AtLeastOnceKafkaSink (transactional keys: KafkaSink only)", "TKafkaSink / TAtLeastOnceKafkaSink (Kafka extension)", false, []string{kafka.SinkClassName, kafka.AtLeastOnceSinkClassName}},
		{"ServiceLogSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = ServiceLogSource)", t(servicelog.Params{}), "ServiceLogSource (read by a Transform only)", "TServiceLogSource", false, []string{servicelog.ClassName}},
		{"Kafka TLS", "<kafka parameters>.tls", t(kafka.TLSParams{}), "every Kafka connector", "TKafkaClient resource", false, nil},
		{"Kafka SASL", "<kafka parameters>.sasl", t(kafka.SASLParams{}), "every Kafka connector", "TKafkaClient resource", false, nil},
		{"ClickHouse sink parameters", "computations.<id>.sinks.<id>.parameters (ClickHouseBatchingSink, ShardedClickHouseBatchingSink, AtLeastOnceClickHouseSink, AtMostOnceClickHouseSink)", t(clickhouse.Params{}),
			"every ClickHouse sink (host or hosts: not the sharded class; shard_hosts and sharding_key_columns: ShardedClickHouseBatchingSink only; max_batch_*: not the at-most-once class); docs/clickhouse.md is the guide",
			"ClickHouse extension sinks", true, []string{clickhouse.BatchingSinkClassName, clickhouse.ShardedBatchingSinkClassName, clickhouse.AtLeastOnceSinkClassName, clickhouse.AtMostOnceSinkClassName}},
		{"StaticTableSource parameters", "computations.<id>.source_streams.<id>.parameters (source_class_name = StaticTableSource)", t(statictable.SourceParams{}), "StaticTableSource", "TStaticTableSource", true, []string{statictable.SourceClassName}},
		{"ArrivalOrderTableSink parameters", "computations.<id>.sinks.<id>.parameters (sink_class_name = ArrivalOrderTableSink)", t(statictable.SinkParams{}), "ArrivalOrderTableSink", "TArrivalOrderTableSink", true, []string{statictable.SinkClassName}},
		{"Static table column", "<StaticTableSource or ArrivalOrderTableSink parameters>.columns[i]", t(statictable.Column{}), "StaticTableSource, ArrivalOrderTableSink", "table schema column", true, nil},
	}
}

// ranges gives the accepted values of the keys that need one (numbers,
// durations, enumerations), by "package.Owner.key"; the limits are the constants
// Validate and the connectors check.
var ranges = map[string]string{
	"spec.Computation.partition_count":                     fmt.Sprintf("1 … %d (spec.MaxPartitionCount)", spec.MaxPartitionCount),
	"spec.Computation.max_rows_per_batch":                  fmt.Sprintf("1 … %d (spec.MaxRowsPerBatch)", spec.MaxRowsPerBatch),
	"spec.Computation.max_bytes_per_batch":                 fmt.Sprintf("1 … %d (1 GiB, spec.MaxBytesPerBatch)", spec.MaxBytesPerBatch),
	"spec.Computation.batch_duration":                      ">= 0 (0: process what is there at once), < dynamic_spec.lost_job_timeout",
	"spec.Computation.state_cache_byte_size_limit":         "> 0",
	"spec.Computation.timer_store_count_limit":             "> 0",
	"spec.Computation.timer_store_byte_size_limit":         "> 0",
	"spec.Computation.lease_check_period":                  "> 0",
	"spec.Computation.output_store_count_limit":            "> 0",
	"spec.Computation.output_store_byte_size_limit":        "> 0",
	"spec.Computation.empty_batch_backoff":                 "> 0, < dynamic_spec.lost_job_timeout",
	"spec.Computation.processing_mode":                     "exactly_once, at_least_once_consistent",
	"spec.AtMostOnceStrategy.total_queue_bytes_limit":      "> 0",
	"spec.AtMostOnceStrategy.suspend_destruction_duration": "> 0",
	"spec.TimerStream.time_type":                           "event_time, system_time",
	"spec.WatermarkStrategy.out_of_orderness_bound":        ">= 0",
	"spec.WatermarkStrategy.idle_partition_timeout":        ">= 0 (0: off)",
	"spec.Column.type":                                     "int8 … uint64, float, double, boolean, string, utf8, any, yson, null, void, date, datetime, timestamp, interval, json, uuid (key columns: not any or yson)",
	"spec.DynamicSpec.target_state":                        "working, stopped, paused, completed",
	"spec.DynamicSpec.scheduler_period":                    "> 0",
	"spec.DynamicSpec.lease_timeout":                       "> lease_ping_period",
	"spec.DynamicSpec.lease_ping_period":                   "> 0 and < lease_timeout",
	"spec.DynamicSpec.lease_check_period":                  "> 0",
	"spec.DynamicSpec.lost_job_timeout":                    "> 0",
	"spec.DynamicSpec.job_restart_backoff":                 "> 0",
	"spec.DynamicSpec.job_restart_backoff_max":             ">= job_restart_backoff",
	"spec.DynamicSpec.rescale_quiesce_timeout":             "> 0",
	"spec.DynamicSpec.worker_count":                        fmt.Sprintf("1 … %d (spec.MaxWorkerCount)", spec.MaxWorkerCount),
	"httpsink.Params.max_idle_connections":                 ">= 0",
	"httpsink.Params.max_redirect_count":                   ">= 0",
	"httpsink.Params.request_timeout":                      "> 0",
	"httpsink.Params.attempt_timeout":                      "> 0",
	"httpsink.Params.retry_initial_delay":                  "> 0",
	"httpsink.Params.retry_minimum_delay":                  ">= 0",
	"httpsink.Params.retry_multiplier":                     ">= 1",
	"httpsink.Params.retry_maximum_delay":                  ">= retry_minimum_delay",
	"httpsink.Params.retry_jitter_ratio":                   "0 … 1",
	"httpsink.Params.max_attempt_count":                    ">= 1",
	"kafka.SourceParams.update_partition_count_period":     ">= 0 (0: off)",
	"kafka.SourceParams.partition_filter":                  "[begin, end), 0 <= begin < end",
	"kafka.SourceParams.malformed_message_policy":          "fail, skip",
	"kafka.SourceParams.isolation_level":                   "read_committed, read_uncommitted",
	"kafka.SourceParams.format":                            "json, raw",
	"kafka.SourceParams.poll_timeout":                      "> 0",
	"kafka.SinkParams.delivery_guarantee":                  "exactly_once, at_least_once",
	"kafka.SinkParams.transaction_timeout":                 "> 0",
	"kafka.SinkParams.max_messages_per_transaction":        "> 0",
	"kafka.SinkParams.compression":                         "none, gzip, snappy, lz4, zstd",
	"kafka.SASLParams.mechanism":                           "plain, scram-sha-256, scram-sha-512",
	"servicelog.Params.partition_count":                    "1 … 4096",
	"servicelog.Params.min_cycle_duration":                 ">= 0 (0: the next cycle at once)",
	"clickhouse.Params.format":                             clickhouse.FormatTabSeparated + ", " + clickhouse.FormatJSONEachRow,
	"clickhouse.Params.max_batch_rows":                     "1 … 1048576 (ClickHouse's max_insert_block_size: a batch stays one block)",
	"clickhouse.Params.max_batch_bytes":                    "> 0",
	"clickhouse.Params.replay_horizon":                     ">= 0",
	"clickhouse.Params.replay_horizon_inserts":             ">= 0 (0: not compared)",
	"clickhouse.Params.max_insert_attempts":                ">= 1 (the first attempt counts)",
	"clickhouse.Params.write_timeout":                      "> 0",
	"clickhouse.Params.retry_initial_delay":                ">= 0",
	"clickhouse.Params.retry_maximum_delay":                ">= retry_initial_delay",
	"statictable.SourceParams.partition_count":             "1 … 1024",
	"statictable.SinkParams.table_period":                  "whole seconds, >= 1s",
	"statictable.SinkParams.table_ttl":                     fmt.Sprintf("> 0, at most %d × table_period", statictable.MaxSlotsPerTTL),
	"statictable.SinkParams.max_row_count":                 ">= 1",
	"statictable.SinkParams.max_data_weight":               ">= 1 (bytes)",
	"statictable.SinkParams.format":                        "parquet, jsonl",
	"statictable.SinkParams.compression":                   "snappy, zstd, gzip, none",
	"statictable.SinkParams.close_delay":                   ">= 0",
	"statictable.Column.type":                              "boolean, int64, uint64, double, string, bytes, json",
}

// flowNames gives the Flow counterpart of keys that differ from Flow's, by
// "package.Owner.key"; "" marks a weir extension. Keys not listed have Flow's name
// and meaning.
var flowNames = map[string]string{
	"spec.Computation.partition_count":                        "", // weir: fixed partitioning; Flow sizes partitions from load
	"spec.Computation.max_rows_per_batch":                     "dynamic computation spec max_rows_per_batch",
	"spec.Computation.max_bytes_per_batch":                    "dynamic computation spec max_bytes_per_batch",
	"spec.Computation.batch_duration":                         "dynamic computation spec batch_duration",
	"spec.Computation.lease_check_period":                     "dynamic computation spec lease_check_period",
	"spec.Computation.output_store_count_limit":               "dynamic computation spec output_store_count_limit",
	"spec.Computation.output_store_byte_size_limit":           "dynamic computation spec output_store_byte_size_limit",
	"spec.Computation.empty_batch_backoff":                    "dynamic computation spec empty_batch_backoff",
	"spec.Computation.processing_mode":                        "parameters.processing_mode (accepted in both places)",
	"spec.Computation.allow_batching_with_relaxed_guarantees": "parameters.allow_batching_with_relaxed_guarantees (accepted in both places)",
	"spec.WatermarkStrategy.idle_partition_timeout":           "",
	"spec.DynamicSpec.lease_timeout":                          "controller lease_timeout",
	"spec.DynamicSpec.lease_ping_period":                      "controller lease_ping_period",
	"spec.DynamicSpec.scheduler_period":                       "controller scheduler_period",
	"spec.DynamicSpec.lost_job_timeout":                       "controller lost_job_timeout",
	"spec.DynamicSpec.worker_count":                           "", // weir: workers of the embedded run
	"queue.SinkParams.data_dir":                               "",
	"kafka.SinkParams.compression":                            "",
	"kafka.SinkParams.allow_missing_progress_marker":          "",
	"kafka.SourceParams.format":                               "",
	"spec.Pipeline.external_states":                           "", // weir: Flow's tables live in Cypress; here they are declared
	"spec.Computation.external_state_managers":                "external_state_managers (a map of manager specs in Flow; here the names of the tables written)",
	"spec.Computation.external_state_joiners":                 "external_state_joiners (here the names of the tables read)",
	"spec.ExternalState.key_columns":                          "the table schema's key columns",
	"spec.ExternalState.value_columns":                        "the table schema's value columns",
	"servicelog.Params.table":                                 "the service log table's path",
	"servicelog.Params.partition_count":                       "",
	"servicelog.Params.min_cycle_duration":                    "",
	"servicelog.Params.cycle_end_marker":                      "",
}

// appliesTo narrows "package.Owner.key" to the computations that accept it, as
// Validate's kind rules do.
var appliesTo = map[string]string{
	"spec.Computation.source_streams":                         "source computations only: a Transform or SwiftMap class with one source stream",
	"spec.Computation.input_stream_ids":                       "not source computations",
	"spec.Computation.group_by":                               "not source computations; required by Keyed classes such as Counter",
	"spec.Computation.group_by_schema":                        "not source computations",
	"spec.Computation.timer_streams":                          "not source computations; SwiftMap only without outputs",
	"spec.Computation.sinks":                                  "Transform family only",
	"spec.Computation.processing_mode":                        "Transform family only",
	"spec.Computation.allow_batching_with_relaxed_guarantees": "SwiftMap only",
	"spec.Computation.partition_count":                        "computations reading internal streams; source computations have one partition per source partition",
	"spec.Computation.watermark_strategy":                     "source computations only",
	"spec.Computation.external_state_managers":                "Transform family only",
}

// inherited gives the default of keys whose default comes from elsewhere.
var inherited = map[string]string{
	"spec.Computation.lease_check_period": "dynamic_spec.lease_check_period",
	"kafka.ConnParams.client_id":          "`weir`",
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
		id := keyID(sk)
		k := Key{Name: sk.Name, Type: typeName(sk.Field.Type), Required: sk.Required, Range: ranges[id]}
		k.Doc = docs[sk.Owner.PkgPath()+"."+sk.Owner.Name()+"."+sk.Field.Name]
		if a, ok := appliesTo[id]; ok {
			k.Doc = "(" + a + ") " + k.Doc
		}
		k.Default = defaultOf(def.FieldByIndex(sk.Index), sk)
		if d, ok := inherited[id]; ok {
			k.Default = d
		}
		if f, ok := flowNames[id]; s.Unmapped {
			k.Flow = "not compared"
		} else if ok {
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
the same name and meaning; — (weir): a weir extension Flow does not have;
not compared: a connector whose keys were not checked against Flow's one by
one). Every connector class weir registers has its parameters here (a test
fails otherwise); the queue row columns and the row size limit are at the end.
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
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Name, k.Type, cell(k.Default), cell(rng), cell(k.Flow), cell(k.Doc))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `## Rows

`+"`weir queue read`"+` prints each queue row with three columns the queue keeps
beside it:

| Column | Type | Meaning |
|---|---|---|
| `+"`%[1]s`"+` | integer | the queue partition |
| `+"`%[2]s`"+` | integer | the row's offset in its partition, dense from 0 |
| `+"`%[3]s`"+` | unsigned integer | the store timestamp of the commit that wrote the row: unix seconds in the high 34 bits (`+"`$timestamp >> 30`"+`) and a counter in the low 30 bits; strictly increasing within a partition |

A QueueSource hands a computation the row's own columns only. A KafkaSource
adds `+"`$partition`, `$offset`, `$timestamp`"+` (the record time in unix
milliseconds), `+"`$key`"+` and `+"`$headers`"+` to every row (replacing value
columns of the same names).

Row size limit: a row written with `+"`weir queue write`"+` (or the admin API's
`+"`POST /queues/NAME/rows`"+`) is one line of JSON of at most %[4]d MiB
(%[5]d bytes) without its newline; a longer line rejects the whole write,
naming the line, and nothing of the write is stored.
`, queue.ColTabletIndex, queue.ColRowIndex, queue.ColTimestamp, queue.MaxRowBytes>>20, queue.MaxRowBytes)
	return b.String(), nil
}

// cell makes text fit one table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// keyID names a key in the maps above: "package.Owner.key" (the owner's
// name alone is ambiguous: kafka and queue both have a SinkParams).
func keyID(sk spec.StructKey) string {
	return path.Base(sk.Owner.PkgPath()) + "." + sk.Owner.Name() + "." + sk.Name
}

// specKeys lists "package.Owner.key" for a section's keys.
func specKeys(s Section) []string {
	var out []string
	for _, sk := range spec.StructKeys(s.Type) {
		out = append(out, keyID(sk))
	}
	return out
}
