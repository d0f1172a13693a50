package specdoc

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weir-stream/weir/engine"
)

var update = flag.Bool("update", false, "rewrite docs/spec.md")

const root = "../.."

// TestEveryKeyDocumented: every key the decoders accept has a description
// (its Go field's doc comment) and, when it is a number or a duration, its
// accepted values; every range and Flow entry names a key that exists.
func TestEveryKeyDocumented(t *testing.T) {
	known := map[string]bool{}
	for _, s := range Sections() {
		keys, err := Keys(root, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			where := s.Title + ": " + k.Name
			if strings.TrimSpace(k.Doc) == "" {
				t.Errorf("%s has no description: write a doc comment on its Go field", where)
			}
			if NeedsRange(k) && k.Range == "" {
				t.Errorf("%s (%s) has no documented range: add it to ranges in specdoc.go", where, k.Type)
			}
		}
	}
	for _, s := range Sections() {
		for _, sk := range specKeys(s) {
			known[sk] = true
		}
	}
	for _, m := range []map[string]string{ranges, flowNames, appliesTo, inherited} {
		for id := range m {
			if !known[id] {
				t.Errorf("specdoc entry %q names no key", id)
			}
		}
	}
}

// TestReference: docs/spec.md is what the code generates.
func TestReference(t *testing.T) {
	got, err := Markdown(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "spec.md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Fatalf("docs/spec.md is stale (%v): run go test ./internal/specdoc -update and commit it", err)
	}
}

// TestEveryConnectorDocumented: every source and sink class weir registers
// has its parameters in a section of docs/spec.md, and every class a
// section names is registered.
func TestEveryConnectorDocumented(t *testing.T) {
	reg := engine.DefaultConnectors()
	registered := map[string]bool{}
	for _, c := range append(reg.SourceClasses(), reg.SinkClasses()...) {
		registered[c] = true
	}
	documented := map[string]bool{}
	for _, s := range Sections() {
		for _, c := range s.Classes {
			if !registered[c] {
				t.Errorf("section %q documents %s, which is not a registered connector class", s.Title, c)
			}
			documented[c] = true
		}
	}
	for c := range registered {
		if !documented[c] {
			t.Errorf("connector class %s is registered but its parameters are undocumented: add a Section with its parameter struct and Classes", c)
		}
	}
}

// statedDefault finds a default a description states in words.
var statedDefault = regexp.MustCompile(`(?i)\(default[: ] *[^)]|\bdefault(s)? (is |are )?("|\d|[a-z_]+\b[.)])`)

// TestDefaultsColumnAgrees: a key whose Default column shows "—" (none)
// does not state a default in its description; the default belongs in
// SetDefaults (or in defaultsElsewhere, when it is applied elsewhere).
func TestDefaultsColumnAgrees(t *testing.T) {
	for _, s := range Sections() {
		keys, err := Keys(root, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.Default == "—" && statedDefault.MatchString(k.Doc) {
				t.Errorf("%s: %s shows no default, but its description says %q", s.Title, k.Name, statedDefault.FindString(k.Doc))
			}
		}
	}
}
