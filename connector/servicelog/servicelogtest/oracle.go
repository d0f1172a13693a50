// Package servicelogtest is the oracle of the service log's tests: it
// reads the rows builtin.Digest emitted from a ServiceLogSource over the
// key_counts table (builtin.ExternalCounter) and checks exactly-once
// within each cycle.
package servicelogtest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/plan"
)

// Digest is one row builtin.Digest emitted: a table row seen in a cycle,
// or (End) the cycle-end digest of a partition.
type Digest struct {
	Key   string
	Count int64
	Cycle uint64
	End   bool
	// Rows and Partition: a cycle end's row count and partition index.
	Rows      int64
	Partition int
}

// FromRow converts a row builtin.Digest emitted (as read back from a
// queue: numbers may be int64 or uint64).
func FromRow(r map[string]any) (Digest, error) {
	d := Digest{Cycle: uint64(asInt(r["cycle"]))}
	if r["cycle_end"] == true {
		d.End, d.Rows = true, asInt(r["rows"])
		p, _ := r["partition"].(string)
		_, idx, ok := strings.Cut(p, "#")
		i, _, ok2 := strings.Cut(idx, "/")
		n, err := strconv.Atoi(i)
		if !ok || !ok2 || err != nil {
			return d, fmt.Errorf("cycle end row %v: partition %q is not <table>#<i>/<n>", r, p)
		}
		d.Partition = n
		return d, nil
	}
	k, ok := r["key"].(string)
	if !ok {
		return d, fmt.Errorf("digest row %v has no key", r)
	}
	d.Key, d.Count = k, asInt(r["count"])
	return d, nil
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case float64:
		return int64(x)
	}
	return -1
}

// PartitionOf returns the service log partition (of n) that holds key's
// row in key_counts: the first key column is codec.Hash64(key), split as
// the engine splits hash ranges.
func PartitionOf(key string, n int) int { return plan.PartitionIndex(codec.Hash64([]byte(key)), n) }

// Result summarizes a check.
type Result struct {
	// Completed counts the completed cycles (with a cycle-end row), per
	// partition.
	Completed map[int]int
	// Bad describes every violation.
	Bad []string
}

// Check verifies exactly-once within each cycle: for every partition and
// cycle, no key is emitted twice, every key lies in the partition, and no
// unknown key (outside stable and volatile) appears; for every completed
// cycle (one with a cycle-end row, of which there is one) every stable key
// of the partition is emitted exactly once and the cycle-end row counts
// the cycle's rows. stable keys are in the table for the whole run;
// volatile ones are added or deleted while it runs (seen at most once per
// cycle).
func Check(ds []Digest, partitions int, stable []string, volatile map[string]bool) Result {
	type pc struct {
		p int
		c uint64
	}
	seen := map[pc]map[string]int{}
	ends := map[pc][]Digest{}
	isStable := map[string]bool{}
	for _, k := range stable {
		isStable[k] = true
	}
	res := Result{Completed: map[int]int{}}
	bad := func(format string, args ...any) { res.Bad = append(res.Bad, fmt.Sprintf(format, args...)) }
	for _, d := range ds {
		if d.End {
			ends[pc{d.Partition, d.Cycle}] = append(ends[pc{d.Partition, d.Cycle}], d)
			continue
		}
		if !isStable[d.Key] && !volatile[d.Key] {
			bad("cycle %d: unknown key %q", d.Cycle, d.Key)
			continue
		}
		k := pc{PartitionOf(d.Key, partitions), d.Cycle}
		if seen[k] == nil {
			seen[k] = map[string]int{}
		}
		seen[k][d.Key]++
	}
	for k, keys := range seen {
		for key, n := range keys {
			if n > 1 {
				bad("partition %d, cycle %d: key %s emitted %d times", k.p, k.c, key, n)
			}
		}
	}
	for k, es := range ends {
		if len(es) > 1 {
			bad("partition %d, cycle %d: %d cycle-end rows", k.p, k.c, len(es))
		}
		res.Completed[k.p]++
		rows := 0
		for _, n := range seen[k] {
			rows += n
		}
		if es[0].Rows != int64(rows) {
			bad("partition %d, cycle %d: the cycle-end row counts %d rows, %d were emitted", k.p, k.c, es[0].Rows, rows)
		}
		for _, key := range stable {
			if PartitionOf(key, partitions) == k.p && seen[k][key] != 1 {
				bad("partition %d, completed cycle %d: key %s (in the table throughout) emitted %d times, want once", k.p, k.c, key, seen[k][key])
			}
		}
	}
	sort.Strings(res.Bad)
	return res
}
