package spec

import (
	"fmt"
	"math"
	"time"

	"go.ytsaurus.tech/yt/go/yson"
	"gopkg.in/yaml.v3"
)

// Duration is a time span written in a spec either as an integer number of
// milliseconds, the way Flow writes durations (`"suspend_destruction_duration" =
// 60000;`), or as a string accepted by time.ParseDuration ("1s", "250ms",
// "1m30s"). Both forms work in YSON and YAML.
//
// Duration marshals as the string form (time.Duration.String), so a spec
// written by weir reads back to the same value without sub-millisecond loss.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String returns d in time.Duration notation ("1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// durationExpected describes the accepted forms in type errors.
const durationExpected = `a duration (integer milliseconds, or a string such as "1s" or "250ms")`

// durationFrom converts a decoded generic value into a Duration. The returned
// *Error has no Path; callers set it.
func durationFrom(raw any) (Duration, *Error) {
	switch v := raw.(type) {
	case int64:
		if v > math.MaxInt64/int64(time.Millisecond) || v < math.MinInt64/int64(time.Millisecond) {
			return 0, &Error{Msg: fmt.Sprintf("duration of %d ms is out of range; use a smaller value", v)}
		}
		return Duration(time.Duration(v) * time.Millisecond), nil
	case uint64:
		if v > math.MaxInt64/uint64(time.Millisecond) {
			return 0, &Error{Msg: fmt.Sprintf("duration of %d ms is out of range; use a smaller value", v)}
		}
		return Duration(time.Duration(v) * time.Millisecond), nil
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, &Error{Msg: fmt.Sprintf("expected %s, got %q", durationExpected, v), Err: err}
		}
		return Duration(d), nil
	}
	return 0, &Error{Msg: fmt.Sprintf("expected %s, got %s", durationExpected, describe(raw))}
}

// MarshalYSON writes d as a YSON string such as "1m0s".
func (d Duration) MarshalYSON() ([]byte, error) {
	return yson.Marshal(d.String())
}

// UnmarshalYSON accepts integer milliseconds or a duration string, so that
// yson.Unmarshal into spec types agrees with ParseYSON.
func (d *Duration) UnmarshalYSON(data []byte) error {
	var raw any
	if err := yson.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("spec: decode duration: %w", err)
	}
	n, err := normalizeGo(raw)
	if err != nil {
		return fmt.Errorf("spec: decode duration: %w", err)
	}
	v, e := durationFrom(n)
	if e != nil {
		return e
	}
	*d = v
	return nil
}

// MarshalYAML writes d as a string such as "1m0s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML accepts integer milliseconds or a duration string, so that
// yaml.Unmarshal into spec types agrees with ParseYAML.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	var raw any
	if err := node.Decode(&raw); err != nil {
		return fmt.Errorf("spec: decode duration: %w", err)
	}
	n, err := normalizeGo(raw)
	if err != nil {
		return fmt.Errorf("spec: decode duration: %w", err)
	}
	v, e := durationFrom(n)
	if e != nil {
		return e
	}
	*d = v
	return nil
}
