package spec

// These tests prove that DecodeParameters gives connector packages the same
// strictness as the pipeline decoders: unknown keys and wrong types are
// errors naming the full path, required keys are enforced, defaults survive
// absent keys, and Duration accepts both forms.

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type testRetry struct {
	Attempts int      `yson:"attempts"`
	Backoff  Duration `yson:"backoff"`
}

func (r *testRetry) SetDefaults() {
	if r.Attempts == 0 {
		r.Attempts = 3
	}
}

type testCommon struct {
	Verbose bool `yson:"verbose"`
}

type testHTTPParams struct {
	testCommon // inline, like package yson

	URL      string               `yson:"url,required"`
	Timeout  Duration             `yson:"timeout"`
	Headers  map[string]string    `yson:"headers"`
	Retry    testRetry            `yson:"retry"`
	Backups  []*testRetry         `yson:"backups"`
	ByName   map[string]testRetry `yson:"by_name"`
	Port     uint16               `yson:"port"`
	Ratio    float64              `yson:"ratio"`
	Extra    any                  `yson:"extra"`
	Optional *int64               `yson:"optional"`
	Ignored  string               `yson:"-"`
	Untagged string
}

func (p *testHTTPParams) SetDefaults() {
	if p.Timeout == 0 {
		p.Timeout = Duration(10 * time.Second)
	}
}

func TestDecodeParameters(t *testing.T) {
	p := mustParse(t, ParseYSON, `"computations" = {"C" = {"computation_class_name" = "X"; "parameters" = {
		"url" = "http://localhost/x";
		"headers" = {"A" = "b"};
		"retry" = {"backoff" = 1500};
		"backups" = [{"attempts" = 7}; #];
		"by_name" = {"x" = {}};
		"port" = 8080u;
		"ratio" = 2;
		"extra" = [1; "two"];
		"verbose" = %true;
		"Untagged" = "yes";
	}}}`)
	var got testHTTPParams
	if err := DecodeParameters("computations.C.parameters", p.Computations["C"].Parameters, &got); err != nil {
		t.Fatal(err)
	}
	want := testHTTPParams{
		testCommon: testCommon{Verbose: true},
		URL:        "http://localhost/x",
		Timeout:    Duration(10 * time.Second), // default kept
		Headers:    map[string]string{"A": "b"},
		Retry:      testRetry{Attempts: 0, Backoff: Duration(1500 * time.Millisecond)},
		Backups:    []*testRetry{{Attempts: 7}, {Attempts: 3}},
		ByName:     map[string]testRetry{"x": {Attempts: 3}},
		Port:       8080,
		Ratio:      2,
		Extra:      []any{int64(1), "two"},
		Untagged:   "yes",
	}
	// Retry is a struct field present in out: decoded in place, so its
	// SetDefaults is not called (out's own SetDefaults is responsible).
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestDecodeParametersErrors(t *testing.T) {
	const path = "computations.C.sinks.k.parameters"
	for _, tc := range []struct {
		name   string
		params map[string]any
		at     string
		msg    string
	}{
		{"missing required", map[string]any{}, path + ".url", "required key is missing"},
		{"misspelled key", map[string]any{"url": "u", "timout": "1s"}, path + ".timout", `did you mean "timeout"`},
		{"nested misspelled key", map[string]any{"url": "u", "retry": map[string]any{"attempt": 1}}, path + ".retry.attempt", `did you mean "attempts"`},
		{"ignored field is unknown", map[string]any{"url": "u", "Ignored": "x"}, path + ".Ignored", "unknown key"},
		{"no spec hints for connector keys", map[string]any{"url": "u", "required": true}, path + ".required", "unknown key; valid keys here: Untagged, backups"},
		{"negative unsigned", map[string]any{"url": "u", "port": -1}, path + ".port", "expected a non-negative integer, got -1"},
		{"unsigned out of range", map[string]any{"url": "u", "port": 70000}, path + ".port", "out of range for uint16"},
		{"wrong type", map[string]any{"url": 5}, path + ".url", "expected a string, got an integer (5)"},
		{"map value type", map[string]any{"url": "u", "headers": map[string]any{"A": true}}, path + ".headers.A", "expected a string, got a boolean (true)"},
		{"list item", map[string]any{"url": "u", "backups": []any{map[string]any{"attempts": "x"}}}, path + ".backups[0].attempts", "expected an integer"},
		{"float for a number is fine, string is not", map[string]any{"url": "u", "ratio": "1"}, path + ".ratio", "expected a number"},
		{"duration", map[string]any{"url": "u", "timeout": "forever"}, path + ".timeout", "expected a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out testHTTPParams
			wantErrorAt(t, DecodeParameters(path, tc.params, &out), tc.at, tc.msg)
		})
	}
}

func TestDecodeParametersGoValues(t *testing.T) {
	var out testHTTPParams
	err := DecodeParameters("p", map[string]any{
		"url":      "u",
		"timeout":  3 * time.Second, // a time.Duration is a duration, not milliseconds
		"port":     int32(80),
		"ratio":    float32(0.5),
		"headers":  map[string]string{"k": "v"},
		"optional": 5,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.Timeout != Duration(3*time.Second) || out.Port != 80 || out.Ratio != 0.5 || out.Headers["k"] != "v" || *out.Optional != 5 {
		t.Errorf("got %+v", out)
	}
	// A Go struct in a parameters map is not a map: reported, not panicking.
	err = DecodeParameters("p", map[string]any{"url": "u", "backups": []testRetry{{Attempts: 1}}}, &out)
	wantErrorAt(t, err, "p.backups[0]", "expected a map, got a value of Go type spec.testRetry")
}

func TestDecodeParametersBadTarget(t *testing.T) {
	for _, out := range []any{nil, testHTTPParams{}, new(int), (*testHTTPParams)(nil)} {
		if err := DecodeParameters("p", nil, out); err == nil || !strings.Contains(err.Error(), "pointer to a struct") {
			t.Errorf("DecodeParameters(%T) = %v", out, err)
		}
	}
	type unsupported struct {
		C chan int         `yson:"c"`
		M map[int]string   `yson:"m"`
		I interface{ F() } `yson:"i"`
	}
	err := DecodeParameters("p", map[string]any{"c": 1, "m": map[string]any{"1": "x"}, "i": 1}, &unsupported{})
	for _, key := range []string{"p.c", "p.m", "p.i"} {
		wantErrorAt(t, err, key, "a bug in the target struct")
	}
}

func TestDecodeParametersCyclicValue(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	var out struct {
		Self any `yson:"self"`
	}
	err := DecodeParameters("p", m, &out)
	if err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("got %v, want a nesting error", err)
	}
}

type testInner struct {
	Name  string `yson:"name"`
	Inner string `yson:"inner"`
}

type testShadow struct {
	testInner        // embedded first, but its "name" is shadowed
	Name      string `yson:"name"`
}

func TestDecodeParametersEmbeddedShadowed(t *testing.T) {
	var out testShadow
	if err := DecodeParameters("p", map[string]any{"name": "outer", "inner": "i"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != "outer" || out.testInner.Name != "" || out.Inner != "i" {
		t.Errorf("got %+v: the shallower field must win", out)
	}
}
