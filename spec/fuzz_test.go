package spec

// The fuzz targets prove that decoding arbitrary bytes never panics, in either
// format, and that validating whatever decodes never panics either.

import (
	"os"
	"path/filepath"
	"testing"
)

func addFuzzSeeds(f *testing.F, pattern string, extra ...string) {
	files, _ := filepath.Glob(pattern)
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

func fuzzParse(t *testing.T, parse func([]byte) (*Pipeline, error), data []byte) {
	p, err := parse(data)
	if err != nil {
		if err.Error() == "" {
			t.Fatal("empty error message")
		}
		return
	}
	_ = p.Validate(nil)
	_ = p.Validate(resolve)
	p.SetDefaults()
	_ = p.Validate(resolve)
}

func FuzzParseYSON(f *testing.F) {
	addFuzzSeeds(f, "testdata/*.yson",
		seedExample1YSON, seedExample2YSON, seedExample3YSON,
		`{a=<x=1>2}`, `"a" = "b // c"; // d`, `computations={C={parameters={processing_mode=1}}}`,
		`streams={s={schema=[{name=a;type=uint64}]}}`, "\x01\x02ab", `[`, `{}`, `#`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParse(t, ParseYSON, data) })
}

func FuzzParseYAML(f *testing.F) {
	addFuzzSeeds(f, "testdata/*.yaml",
		seedExample1YAML, seedExample2YAML, seedExample3YAML,
		"a: &x [*x]\n", "computations: {C: {sinks: {k: {parameters: {at_most_once_strategy: 1}}}}}\n",
		"? [a]\n: b\n", "- 1\n", "---\n---\n", "streams: {s: }\n", "x: 2001-12-14\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParse(t, ParseYAML, data) })
}
