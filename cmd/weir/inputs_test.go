package main

// Bad inputs through the real binary: what 'weir queue write' and 'weir
// run' refuse instead of silently changing data or results.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// weirFails runs the binary, expects a non-zero exit, and returns its
// combined output.
func weirFails(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(weirBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("weir %v succeeded, want a failure:\n%s", args, out)
	}
	return string(out)
}

// TestQueueWriteRefusesLossyRows: a row that would be stored changed (a
// repeated name, invalid UTF-8, a lone surrogate, an integer outside 64
// bits) or grouped under no key (a list or map key) rejects the whole
// write, naming the line and the field; integers up to 2^64-1 come back
// exactly.
func TestQueueWriteRefusesLossyRows(t *testing.T) {
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", "q")
	good := `{"key":"a","n":1}` + "\n"
	for _, c := range []struct{ line, says string }{
		{`{"key":"a","n":1,"n":2}`, `line 2: codec: json: column "n" appears twice`},
		{"{\"key\":\"a\",\"s\":\"\xff\"}", "line 2: codec: json: invalid UTF-8 at byte 17"},
		{`{"key":"a","s":"\ud800"}`, "line 2: codec: json: \\ud800 at byte 17 is half of a UTF-16 surrogate pair"},
		{`{"key":"a","n":18446744073709551616}`, `line 2: codec: json: column "n": integer 18446744073709551616 is outside the 64-bit range`},
		{`{"key":["a","b"]}`, `line 2: column "key" holds a list, which cannot be a key`},
		{`{"key":{"a":1}}`, `line 2: column "key" holds a map, which cannot be a key`},
	} {
		out := weirFails(t, good+c.line+"\n"+good, "queue", "write", "--data", dir, "q")
		if !strings.Contains(out, c.says) || !strings.Contains(out, "nothing was written") {
			t.Errorf("write %s: %s\nwant %q and \"nothing was written\"", c.line, out, c.says)
		}
	}
	if got := weir(t, "", "queue", "read", "--data", dir, "q"); got != "" {
		t.Fatalf("rows were written despite the errors: %q", got)
	}
	if out := weirFails(t, good, "queue", "write", "--data", dir, "nope"); !strings.Contains(out, "create it with: weir queue create --data DIR --partitions N nope") {
		t.Errorf("write to a missing queue: %s", out)
	}
	if out := weirFails(t, good, "queue", "write", "--data", dir, "--partition", "-5", "q"); !strings.Contains(out, "partition -5 out of range") {
		t.Errorf("--partition -5: %s", out)
	}
	// Exact integers at the edges of float64's and the 64-bit ranges.
	in := `{"key":"a","p53":9007199254740993,"i63":9223372036854775807,"u63":9223372036854775808,"u64":18446744073709551615,"neg":-9223372036854775808}` + "\n"
	weir(t, in, "queue", "write", "--data", dir, "--partition", "0", "q")
	out := weir(t, "", "queue", "read", "--data", dir, "q")
	for _, want := range []string{`"p53":9007199254740993`, `"i63":9223372036854775807`, `"u63":9223372036854775808`, `"u64":18446744073709551615`, `"neg":-9223372036854775808`} {
		if !strings.Contains(out, want) {
			t.Errorf("read back %s, want %s", out, want)
		}
	}
}

// TestSpecRefusesKeylessCounting: a keyed class without group_by, a
// group_by column the stream's schema lacks, and a key column that may hold
// lists are refused when the spec is loaded, before anything runs.
func TestSpecRefusesKeylessCounting(t *testing.T) {
	base, err := os.ReadFile(exampleSpec("counter"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, old, new, says string
	}{
		{"no group_by", `"group_by" = ["key"];`, ``,
			`computations.Counter.group_by: class "Counter" keeps per-key state and needs a key`},
		{"group_by column missing from the schema", `"words" = {};`, `"words" = {"schema" = [{"name" = "user"; "type" = "string"}]};`,
			`computations.Counter.group_by[0]: key column "key" is not in the schema of input stream "words"`},
		{"key column of type any", `"words" = {};`, `"words" = {"schema" = [{"name" = "key"; "type" = "any"}]};`,
			`key column "key" is of type "any" in the schema of input stream "words", which may hold lists and maps`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(c.old)) {
				t.Fatalf("the example no longer contains %s", c.old)
			}
			spec := filepath.Join(t.TempDir(), "spec.yson")
			os.WriteFile(spec, bytes.Replace(base, []byte(c.old), []byte(c.new), 1), 0o644)
			dir, _ := setup(t, 10, 2, 1)
			out := weirFails(t, "", "run", "--data", dir, "--spec", spec, "--progress", "0")
			if !strings.Contains(out, c.says) {
				t.Fatalf("weir run: %s\nwant %q", out, c.says)
			}
			if got := weir(t, "", "queue", "read", "--data", dir, "counts"); got != "" {
				t.Fatalf("the refused spec produced output: %q", got)
			}
		})
	}
}

// TestSpecBounds: a number that sizes memory beyond its documented limit is
// refused at load (not a process that grows until the machine dies), and a
// spec with a hundred thousand mistakes prints a screenful, not a million
// lines.
func TestSpecBounds(t *testing.T) {
	base, err := os.ReadFile(exampleSpec("counter"))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := setup(t, 10, 2, 1)
	spec := filepath.Join(t.TempDir(), "spec.yson")
	os.WriteFile(spec, bytes.Replace(base, []byte(`"group_by" = ["key"];`), []byte(`"group_by" = ["key"]; "partition_count" = 1000000000;`), 1), 0o644)
	out := weirFails(t, "", "run", "--data", dir, "--spec", spec, "--progress", "0")
	if !strings.Contains(out, "computations.Counter.partition_count: 1000000000 is above the limit of 4096") {
		t.Fatalf("partition_count = 1e9: %s", out)
	}

	var many strings.Builder
	many.WriteString(`"computations" = {"C" = {"computation_class_name" = "Counter";`)
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&many, `"k%06d" = 1;`, i)
	}
	many.WriteString("}};")
	os.WriteFile(spec, []byte(many.String()), 0o644)
	out = weirFails(t, "", "run", "--data", dir, "--spec", spec, "--progress", "0")
	if n := strings.Count(out, "\n"); n > 30 || !strings.Contains(out, "100000 problems") || !strings.Contains(out, "and 99980 more problems") {
		t.Fatalf("%d lines:\n%s", n, out)
	}
	if strings.Count(out, spec) != 1 {
		t.Fatalf("the spec path should appear once:\n%s", out)
	}

	out = weirFails(t, "", "queue", "create", "--data", dir, "--partitions", "1000000", "huge")
	if !strings.Contains(out, "partition count 1000000 out of range [1, 4096]") {
		t.Fatalf("queue create --partitions 1000000: %s", out)
	}
}
