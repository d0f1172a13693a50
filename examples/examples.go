// Package examples embeds the example pipeline specs (examples/*/spec.yson)
// so that the weir command and the tests use exactly the files users read.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed */spec.yson
var files embed.FS

// Spec returns the spec file of example name (for example "counter").
func Spec(name string) ([]byte, error) {
	b, err := files.ReadFile(path.Join(name, "spec.yson"))
	if err != nil {
		return nil, fmt.Errorf("no example %q (have %v)", name, Names())
	}
	return b, nil
}

// Names lists the examples, sorted.
func Names() []string {
	var out []string
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}
