// Package spec holds weir's pipeline spec: its types, decoding from YSON and
// YAML, and validation.
//
// The types mirror YTsaurus Flow's spec names (computations, streams,
// computation_class_name, group_by_schema, input_stream_ids, source_streams,
// sinks, timer_streams, processing_mode, at_most_once_strategy, ...), so a spec
// written for Flow reads the same here, and the seed's examples
// (seed/processing-guarantees.md) parse as written: a top-level YSON map
// fragment with `//` comments.
//
// Decoding happens in two steps. The front end (ParseYSON, ParseYAML, Parse)
// turns the text into generic values (maps, lists, scalars); a typed decoder
// then walks them into the structs. Unlike Flow, which silently drops unknown
// keys, weir rejects them: a misspelled key is an error naming its full path,
// with a did-you-mean, and a value of the wrong type names the path and the
// expected type. All problems are reported at once. Class parameters stay raw
// in the spec (each class defines its own) and are decoded by the class with
// DecodeParameters, which applies the same strictness.
//
// Decoding checks shape; Pipeline.Validate checks meaning: stream wiring, one
// writer per stream, no cycles, key columns, relaxation flags, and — given a
// resolver from class name to Kind, which lives in code, not in the spec — the
// rules of each computation kind.
//
// Defaults suit one machine: sub-second controller cycles and leases of a few
// seconds, where Flow's cluster defaults are seconds to minutes. Each field's
// doc comment gives its default and Flow's where they differ.
package spec
