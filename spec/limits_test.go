package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestErrorListIsCapped: a spec with thousands of problems reports the
// first MaxReported by path and counts the rest.
func TestErrorListIsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString(`"streams" = {"s" = {}}; "computations" = {"C" = {"computation_class_name" = "Counter"; "input_stream_ids" = ["s"];`)
	const n = 5000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `"zz_unknown_%05d" = 1;`, i)
	}
	b.WriteString(`}}`)
	_, err := Parse([]byte(b.String()), "big.yson")
	if err == nil {
		t.Fatal("no error")
	}
	if got := ProblemCount(err); got != n {
		t.Errorf("ProblemCount = %d, want %d", got, n)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxReported+2 { // header, MaxReported problems, "and N more"
		t.Errorf("%d lines, want %d:\n%s", len(lines), MaxReported+2, err)
	}
	if !strings.Contains(lines[0], fmt.Sprintf("%d problems", n)) || !strings.Contains(lines[1], "zz_unknown_00000") {
		t.Errorf("head of the error:\n%s\n%s", lines[0], lines[1])
	}
	var more *MoreError
	if !errors.As(err, &more) || more.N != n-MaxReported || !strings.Contains(lines[len(lines)-1], fmt.Sprintf("and %d more problems", n-MaxReported)) {
		t.Errorf("last line %q, MoreError %+v", lines[len(lines)-1], more)
	}
}

// TestMemoryLimits: numbers that size memory have upper bounds, checked at
// load with the limit in the message; the limit itself is accepted.
func TestMemoryLimits(t *testing.T) {
	const reader = `"R" = {"computation_class_name" = "Reader"; "source_streams" = {"src" = {"source_class_name" = "QueueSource"}}; "output_stream_ids" = ["s"]}`
	for _, c := range []struct {
		key   string
		limit int64
	}{
		{"partition_count", MaxPartitionCount},
		{"max_rows_per_batch", MaxRowsPerBatch},
		{"max_bytes_per_batch", MaxBytesPerBatch},
	} {
		for _, v := range []int64{c.limit, c.limit + 1, 1_000_000_000_000} {
			p := mustParse(t, ParseYSON, fmt.Sprintf(`"streams" = {"s" = {}}; "computations" = {%s; "C" = {"computation_class_name" = "Counter"; "input_stream_ids" = ["s"]; %q = %d}}`, reader, c.key, v))
			err := p.Validate(nil)
			path := "computations.C." + c.key
			if v <= c.limit {
				if err != nil {
					t.Errorf("%s = %d (the limit): %v", c.key, v, err)
				}
				continue
			}
			want := fmt.Sprintf("%s: %d is above the limit of %d", path, v, c.limit)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s = %d: %v, want %q", c.key, v, err, want)
			}
		}
	}
	p := mustParse(t, ParseYSON, `"streams" = {"s" = {}}; "computations" = {`+reader+`; "C" = {"computation_class_name" = "Counter"; "input_stream_ids" = ["s"]}}; "dynamic_spec" = {"worker_count" = 100000}`)
	if err := p.Validate(nil); err == nil || !strings.Contains(err.Error(), "dynamic_spec.worker_count: 100000 is above the limit of 256") {
		t.Errorf("worker_count: %v", err)
	}
}
