package specdoc

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
