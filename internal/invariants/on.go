//go:build invariants || race

package invariants

// Enabled is true: built with the invariants tag or the race detector.
const Enabled = true
