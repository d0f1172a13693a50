// Package invariants holds assertions of the engine's internal invariants:
// properties the code relies on but cannot express in types (epoch
// timestamps increase, published watermarks never decrease, a sync sink's
// acknowledged ids strictly increase, a receiver never applies a message
// id twice).
//
// As in Pebble, the checks are compiled in only under the "invariants"
// build tag or the race detector, so `go test -race ./...` (the README's
// test command, run by CI) checks them and a release build pays nothing.
// A violated invariant is a bug in weir, not bad input: Check panics, so
// that the test that provoked it fails at the line that relied on it.
package invariants

import "fmt"

// Check panics with the formatted message if Enabled and cond is false.
// Callers compute expensive conditions only under `if invariants.Enabled`.
func Check(cond bool, format string, args ...any) {
	if Enabled && !cond {
		panic(fmt.Sprintf("weir invariant violated: "+format, args...))
	}
}
