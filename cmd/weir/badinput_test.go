package main

// Hostile and mistaken inputs through the real binary (issue 25, items
// 5–10): what the operator sees instead of a cleared terminal, a forged
// log line, a silently created store or a silently accepted value.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// TestStderrEscapesRowText: a row whose column names hold an ESC sequence
// (clear the screen) and a newline followed by a forged "pipeline
// completed" record reaches stderr escaped — no control byte but newline
// and tab, and no line at the left margin that weir did not start.
func TestStderrEscapesRowText(t *testing.T) {
	dir, _ := setup(t, 0, 1, 1)
	forged := "weir: 2026/01/01 00:00:00.000000 pipeline completed after 1.0s: Counter 1 in, 1 out; 1 jobs started, 0 failed, 0 lost"
	weir(t, `{"user":"a","\u001b[2J\u001b]0;owned\u0007":1,"x\n`+forged+`":2,"\u202eevil":3}`+"\n", "queue", "write", "--data", dir, "--partition", "0", "events")
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "100ms", "--drain-timeout", "1s")
	stderr := &testproc.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "FAILING") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure reported:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		done <- nil
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run did not exit:\n%s", stderr.String())
	}
	out := stderr.String()
	for i, c := range []byte(out) {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Fatalf("raw control byte %#x at %d reached stderr:\n%q", c, i, out)
		}
	}
	if strings.Contains(out, "\u202e") {
		t.Fatalf("a bidi override reached stderr:\n%q", out)
	}
	for _, want := range []string{`\x1b[2J\x1b]0;owned\x07`, `\u202eevil`, "\n  " + forged} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, forged[:12]) && strings.Contains(line, "pipeline completed") {
			t.Fatalf("a row forged a record at the left margin: %q\n%s", line, out)
		}
	}
}

// weirOut runs the binary and returns its exit error and its stdout and
// stderr.
func weirOut(stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(weirBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestQueueWriteRowSizeLimit: a line above the row size limit (16 MiB)
// rejects the whole write, naming the line and the limit, and nothing of
// it is written; a line of exactly the limit is a row.
func TestQueueWriteRowSizeLimit(t *testing.T) {
	dir := t.TempDir()
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "1", "q")
	const limit = 16 << 20
	row := func(n int) string { // a JSON object of exactly n bytes
		return `{"s":"` + strings.Repeat("x", n-8) + `"}`
	}
	in := `{"key":"a"}` + "\n" + row(limit+1) + "\n" + `{"key":"b"}` + "\n"
	_, stderr, err := weirOut(in, "queue", "write", "--data", dir, "q")
	if err == nil || !strings.Contains(stderr, "line 2: the line is longer than the row size limit of 16 MiB (16777216 bytes); nothing was written") {
		t.Fatalf("a line of 16 MiB + 1: %v\n%.500s", err, stderr)
	}
	if got := weir(t, "", "queue", "read", "--data", dir, "q"); got != "" {
		t.Fatalf("the refused write left rows: %.200q", got)
	}
	out := weir(t, row(limit)+"\n", "queue", "write", "--data", dir, "q")
	if !strings.Contains(out, "wrote 1 row") {
		t.Fatalf("a line of exactly 16 MiB: %s", out)
	}
	if got := weir(t, "", "queue", "read", "--data", dir, "q"); !strings.Contains(got, `"s":"`+strings.Repeat("x", 100)) || len(got) < limit {
		t.Fatalf("the 16 MiB row read back as %d bytes", len(got))
	}
}

// TestStoreURLsRefused: a URL of a backend weir lacks, or any URL passed
// as --data, is refused, and no directory named after the scheme
// ("mysql:", "postgres:") appears.
func TestStoreURLsRefused(t *testing.T) {
	cwd := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"run", "--store", "mysql://x", "--spec", "SPEC"}, `no store backend for this URL scheme "mysql"`},
		{[]string{"run", "--data", "postgres://h/db", "--spec", "SPEC"}, "--data takes a directory, not a postgres:// URL: pass the URL as --store URL"},
		{[]string{"queue", "create", "--data", "postgres://h/db", "--partitions", "1", "q"}, "--data takes a directory, not a postgres:// URL"},
		{[]string{"queue", "create", "--store", "mysql://x", "--partitions", "1", "q"}, `no store backend for this URL scheme "mysql"`},
		{[]string{"queue", "list", "--data", "s3://bucket/x"}, "--data takes a directory, not a s3:// URL"},
		{[]string{"table", "list", "--store", t.TempDir()}, "--store takes a postgres:// URL; for a data directory pass --data"},
	} {
		for i, a := range c.args {
			if a == "SPEC" {
				c.args[i], _ = filepath.Abs(exampleSpec("counter"))
			}
		}
		cmd := exec.Command(weirBin, c.args...)
		cmd.Dir = cwd
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.says) {
			t.Errorf("weir %v: %v\n%s\nwant %q", c.args, err, out, c.says)
		}
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Fatalf("refused addresses created %v", entries)
	}
}

// TestDataDirRefusesForeignDir: 'weir demo --data DIR' (and any command
// that creates a store) refuses an existing directory holding other files
// and no store, and writes nothing into it; an empty directory is
// accepted.
func TestDataDirRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.md"), []byte("mine"), 0o644)
	for _, args := range [][]string{
		{"demo", "--data", dir, "--events", "10"},
		{"queue", "create", "--data", dir, "--partitions", "1", "q"},
		{"run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "0"},
	} {
		out := weirFails(t, "", args...)
		if !strings.Contains(out, dir+` is not a weir data directory (it has no store/ but holds "notes.md")`) {
			t.Errorf("weir %v: %s", args, out)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the refused directory now holds %v", entries)
	}
	empty := t.TempDir()
	weir(t, "", "queue", "create", "--data", empty, "--partitions", "1", "q")
	weir(t, "", "queue", "create", "--data", empty, "--partitions", "1", "r") // a data directory now
	if !exists(filepath.Join(empty, "store")) {
		t.Fatal("no store in the empty directory")
	}
}

// TestValuesRefused: values that used to be accepted silently (or failed
// with a library's message) are usage errors saying what is wrong.
func TestValuesRefused(t *testing.T) {
	dir, _ := setup(t, 10, 2, 1)
	spec := exampleSpec("counter")
	specDir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(specDir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	long := strings.Repeat("n", 100000)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"run", "--data", dir, "--spec", spec, "--drain-timeout", "-5s"}, "durations must not be negative"},
		{[]string{"run", "--data", dir, "--spec", spec, "--memtable-mib", "0"}, "--memtable-mib 0: want 1 to 1024"},
		{[]string{"run", "--data", dir, "--spec", spec, "--memtable-mib", "4096"}, "--memtable-mib 4096: want 1 to 1024"},
		{[]string{"run", "--data", dir, "--spec", spec, "--progress", "-1s"}, "durations must not be negative"},
		{[]string{"run", "--data", dir, "--spec", spec, "extra"}, `unexpected argument "extra"`},
		{[]string{"pipeline", "status", "--data", dir, "extra"}, `unexpected argument "extra"`},
		{[]string{"worker", "--store", "postgres://127.0.0.1:1/x", "--listen", "127.0.0.1:0", "extra"}, `unexpected argument "extra"`},
		{[]string{"worker", "--store", "postgres://127.0.0.1:1/x", "--listen", "127.0.0.1:0", "--drain-timeout", "-5s"}, "--drain-timeout -5s must not be negative"},
		{[]string{"controller", "--store", "postgres://127.0.0.1:1/x", "--spec", spec, "--lease-timeout", "-1s"}, "--lease-timeout -1s must be positive"},
		{[]string{"queue", "read", "--data", dir, "--limit", "-5", "events"}, "--limit -5: want 0 (all rows) or a positive count"},
		{[]string{"queue", "read", "--data", dir, "events", "counts"}, `want one NAME, got 2 arguments ("events" "counts")`},
		{[]string{"queue", "list", "--data", dir, "events"}, `takes no arguments, got "events"`},
		{[]string{"table", "read", "--data", dir, "--limit", "-1", "key_counts"}, "--limit -1: want 0 (all rows) or a positive count"},
		{[]string{"queue", "create", "--data", dir, "q"}, "need --partitions N"},
		{[]string{"queue", "write", "--data", dir, long}, `"… (100000 bytes): a name is at most 1024 bytes`},
		{[]string{"table", "read", "--data", dir, long}, `"… (100000 bytes): a name is at most 1024 bytes`},
		{[]string{"pipeline", "frob"}, `weir pipeline: unknown subcommand "frob"`},
		{[]string{"queue"}, "weir queue: missing subcommand"},
		{[]string{"demo", "--example", "service-log"}, "--example \"service-log\": the demo runs counter, counter-async, counter-alo, wordcount"},
		{[]string{"run", "--data", dir, "--spec", write("octal.yaml", "computations:\n  Counter:\n    computation_class_name: Counter\n    partition_count: 010\n")},
			"computations.Counter.partition_count: 010 at line 4 has a leading zero, which YAML reads as an octal number"},
		{[]string{"run", "--data", dir, "--spec", write("big.yson", `"computations" = {"C" = {"partition_count" = 99999999999999999999999}};`)},
			"computations.C.partition_count: 99999999999999999999999 is out of range: a YSON integer is 64-bit"},
		{[]string{"run", "--data", dir, "--spec", write("commas.yson", `"computations" = {"C" = {"group_by" = ["a", "b"]}};`)},
			"YSON separates list items and map entries with ';', not ','"},
		{[]string{"run", "--data", dir, "--spec", write("long.yson", `"computations" = {"`+long+`" = {"computation_class_name" = "`+long+`"}};`)},
			"…(100000 bytes)"},
	} {
		_, stderr, err := weirOut("", c.args...)
		if err == nil || !strings.Contains(stderr, c.says) {
			t.Errorf("weir %.200v: %v\n%.2000s\nwant %q", c.args, err, stderr, c.says)
		}
		if len(stderr) > 10000 {
			t.Errorf("weir %.200v: %d bytes of stderr", c.args, len(stderr))
		}
	}
}

// TestQueuesAndTablesOnPostgres: with --store postgres://… the queue and
// table commands work on PostgreSQL, so the external-state example runs
// on it from the command line alone: create and write the input queue,
// run, read the output queue and the table, list both; a missing queue's
// hint names --store.
func TestQueuesAndTablesOnPostgres(t *testing.T) {
	base := pgtest.URL(t)
	url := pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base))
	weir(t, "", "store", "init", "--store", url)
	weir(t, "", "queue", "create", "--store", url, "--partitions", "2", "events")
	weir(t, "", "queue", "create", "--store", url, "--partitions", "2", "counts")
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, `{"key":"k%d","i":%d}`+"\n", i%3, i)
	}
	if out := weir(t, in.String(), "queue", "write", "--store", url, "events"); !strings.Contains(out, "wrote 30 rows to events") {
		t.Fatalf("queue write --store: %s", out)
	}
	weir(t, "", "run", "--store", url, "--spec", exampleSpec("external-state"), "--progress", "0")
	if got := strings.Count(weir(t, "", "queue", "read", "--store", url, "counts"), "\n"); got != 30 {
		t.Fatalf("queue read --store counts: %d rows, want 30", got)
	}
	if out := weir(t, "", "queue", "read", "--store", url, "--limit", "2", "events"); strings.Count(out, "\n") != 2 || !strings.Contains(out, `"$timestamp":`) {
		t.Fatalf("queue read --store --limit 2: %s", out)
	}
	if out := weir(t, "", "queue", "list", "--store", url); !strings.Contains(out, "events\t2 partitions\t30 rows") || !strings.Contains(out, "counts\t2 partitions\t30 rows") {
		t.Fatalf("queue list --store: %s", out)
	}
	if out := weir(t, "", "table", "list", "--store", url); !strings.Contains(out, "key_counts\tkey ") || !strings.Contains(out, "\t3 rows") {
		t.Fatalf("table list --store: %s", out)
	}
	out := weir(t, "", "table", "read", "--store", url, "key_counts")
	for k := 0; k < 3; k++ {
		if !strings.Contains(out, fmt.Sprintf(`"count":10,"key":"k%d"`, k)) {
			t.Fatalf("table read --store: %s", out)
		}
	}
	if out := weirFails(t, "{}\n", "queue", "write", "--store", url, "nope"); !strings.Contains(out, "on PostgreSQL, --store URL instead of --data DIR") {
		t.Fatalf("write to a missing queue on PostgreSQL: %s", out)
	}
	if strings.Contains(out, "password") {
		t.Fatalf("an error shows the URL's password: %s", out)
	}
}
