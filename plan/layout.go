package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Layout is the part of a plan that a rescale changes: the partition count
// of each keyed computation (source computations have one partition per
// source partition and are not in it). A running pipeline's layout can
// differ from its spec's partition_count while a rescale is under way, and
// after 'weir pipeline rescale' (controller/rescale.go).
type Layout map[string]int

// String lists the counts in name order: "Counter=4 Sum=2".
func (l Layout) String() string {
	var b strings.Builder
	for i, n := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n + "=" + strconv.Itoa(l[n]))
	}
	return b.String()
}

// Layout returns p's layout.
func (p *Plan) Layout() Layout {
	l := Layout{}
	for name, c := range p.Computations {
		if !c.IsSource() {
			l[name] = c.Partitions
		}
	}
	return l
}

// Rescalable says why c's partition count cannot change while it runs (nil:
// it can). A source computation's partitions are its source's. A SwiftMap's
// outputs inherit their parents' ids, and its receivers keep one frontier
// per (sender partition, origin): a sender id naming another key range
// after a rescale would make them drop its outputs as processed.
func (c *CompPlan) Rescalable() error {
	switch {
	case c.IsSource():
		return fmt.Errorf("computation %s reads a source: it has one partition per source partition", c.Name)
	case c.Swift():
		return fmt.Errorf("computation %s is a SwiftMap: its outputs keep their inputs' ids, and its receivers' frontiers per sender partition would drop them after a rescale; change its partition_count with the pipeline stopped (drained)", c.Name)
	}
	return nil
}

// WithLayout returns a plan whose keyed computations have l's partition
// counts (a computation l does not name keeps its own). A computation
// whose count is unchanged keeps its *CompPlan, so that pointers the
// controller holds stay valid; p itself is not changed.
func (p *Plan) WithLayout(l Layout) (*Plan, error) {
	out := &Plan{Computations: make(map[string]*CompPlan, len(p.Computations))}
	for name, c := range p.Computations {
		n, ok := l[name]
		if !ok || n == c.Partitions {
			out.Computations[name] = c
			continue
		}
		if c.IsSource() {
			return nil, fmt.Errorf("plan: layout sets %d partitions of %s, which reads a source", n, name)
		}
		if n < 1 {
			return nil, fmt.Errorf("plan: layout sets %d partitions of %s; want at least 1", n, name)
		}
		cp := *c
		cp.Partitions = n
		out.Computations[name] = &cp
	}
	for name := range l {
		if _, ok := p.Computations[name]; !ok {
			return nil, fmt.Errorf("plan: layout names computation %s, which the pipeline does not have", name)
		}
	}
	return out, nil
}

// SwiftSourceUpstream returns the Swift source computation that feeds the
// SwiftMap c through SwiftMaps only ("" if none, or if c is not a
// SwiftMap). Such a source replays, after any restart, what it read since
// its committed position — a Swift hop keeps no outbox, so the source's
// position moves only with what it knows was delivered — and the replays
// reach c's receivers through c's partitions again, deduplicated by their
// frontiers per (sender partition, origin). A drain does not prevent it (a
// drained pipeline's next run may still replay), so c's partition count
// may never change: the replays would arrive under sender partitions whose
// frontiers never saw them.
func (p *Plan) SwiftSourceUpstream(c *CompPlan) string {
	if !c.Swift() || c.IsSource() {
		return ""
	}
	for _, u := range p.Upstream(c) {
		if !u.Swift() {
			continue
		}
		if u.IsSource() {
			return u.Name
		}
		if s := p.SwiftSourceUpstream(u); s != "" {
			return s
		}
	}
	return ""
}
