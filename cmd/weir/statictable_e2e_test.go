package main

// End-to-end tests of the static table connectors through the real weir
// binary: examples/static-table (StaticTableSource → Counter →
// ArrivalOrderTableSink) over Parquet input tables, killed with SIGKILL at
// each named point of the sink's publish sequence (a binary built with the
// weir_crashpoints tag) and at random moments, rerun until it completes;
// the oracle reads the output directory's manifest and tables with
// parquet-go. Broken inputs — a truncated Parquet file, a file without
// read permission, a table changed after it was read — stop the pipeline
// with an error naming the file, and once fixed it completes with nothing
// lost or duplicated.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/statictable"
	"github.com/weir-stream/weir/connector/statictable/tabletest"
	"github.com/weir-stream/weir/internal/testproc"
)

var crashBin = sync.OnceValues(func() (string, error) {
	path := filepath.Join(filepath.Dir(weirBin), "weir-crashpoints")
	out, err := exec.Command("go", "build", "-tags", "weir_crashpoints", "-o", path, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build with weir_crashpoints: %v\n%s", err, out)
	}
	return path, nil
})

// staticFixture is one pipeline's directories: data (the store), in, out,
// and the example spec rewritten to use them with a 1s table period.
type staticFixture struct {
	data, in, out, spec string
	want                map[string]int
}

func newStaticFixture(t *testing.T, tables, rows, keys int, seed uint64) *staticFixture {
	t.Helper()
	root := t.TempDir()
	f := &staticFixture{data: filepath.Join(root, "data"), in: filepath.Join(root, "in"), out: filepath.Join(root, "out"), spec: filepath.Join(root, "spec.yson")}
	if err := os.MkdirAll(f.in, 0o755); err != nil {
		t.Fatal(err)
	}
	f.want = tabletest.WriteInput(t, f.in, tables, rows, keys, seed)
	b, err := os.ReadFile(exampleSpec("static-table"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{
		{`"directory" = "input";`, fmt.Sprintf(`"directory" = %q;`, f.in)},
		{`"output_directory" = "output";`, fmt.Sprintf(`"output_directory" = %q; "close_delay" = 100;`, f.out)},
		{`"table_period" = "10s";`, `"table_period" = "1s";`},
		{`"table_ttl" = "24h";`, `"table_ttl" = "1h";`},
		{`"max_row_count" = 50000;`, `"max_row_count" = 1500;`},
	} {
		if !bytes.Contains(b, []byte(r[0])) {
			t.Fatalf("examples/static-table/spec.yson lacks %s", r[0])
		}
		b = bytes.Replace(b, []byte(r[0]), []byte(r[1]), 1)
	}
	if err := os.WriteFile(f.spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *staticFixture) check(t *testing.T) {
	t.Helper()
	tabletest.CheckExact(t, tabletest.ReadOutput(t, f.out), f.want)
}

// TestStaticTableCrashPoints: for each named point of the sink's publish
// sequence, a run is SIGKILLed when a sink reaches it the second time; the
// same command then runs until the pipeline completes. Each key's counts
// in the output tables are exactly 1..n.
func TestStaticTableCrashPoints(t *testing.T) {
	bin, err := crashBin()
	if err != nil {
		t.Fatal(err)
	}
	for i, point := range statictable.CrashPoints {
		t.Run(point, func(t *testing.T) {
			f := newStaticFixture(t, 5, 1200, 60, uint64(i))
			cmd := exec.Command(bin, "run", "--data", f.data, "--spec", f.spec, "--progress", "0")
			cmd.Env = append(os.Environ(), statictable.CrashEnv+"="+point+":2")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the run was not killed at %s: %v\n%s", point, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "crash point "+point) {
				t.Fatalf("killed, but not at the crash point:\n%s", stderr.String())
			}
			weir(t, "", "run", "--data", f.data, "--spec", f.spec, "--progress", "0")
			f.check(t)
		})
	}
}

// TestStaticTableRandomKills: SIGKILL at random moments, rerun until the
// pipeline completes; exactly once.
func TestStaticTableRandomKills(t *testing.T) {
	f := newStaticFixture(t, 6, 1500, 100, 21)
	kills := runKilled(t, f.data, f.spec, 21, 5)
	t.Logf("%d SIGKILLs before completion", kills)
	f.check(t)
}

// bgRun is a 'weir run -v' in the background.
type bgRun struct {
	cmd    *exec.Cmd
	stderr *testproc.Buffer
	done   chan error
}

// startStaticRun starts 'weir run -v' over the fixture.
func startStaticRun(t *testing.T, f *staticFixture, attr *syscall.SysProcAttr) *bgRun {
	t.Helper()
	r := &bgRun{cmd: exec.Command(weirBin, "run", "-v", "--data", f.data, "--spec", f.spec, "--progress", "0"), stderr: &testproc.Buffer{}, done: make(chan error, 1)}
	r.cmd.SysProcAttr = attr
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(r.kill)
	return r
}

// kill SIGKILLs the run (if it still runs) and waits for it.
func (r *bgRun) kill() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	if r.done != nil {
		<-r.done
		r.done = nil
	}
}

// waitFor polls the run's stderr for s with a real-time bound; the run
// must not end meanwhile.
func (r *bgRun) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.stderr.String(), s) {
		select {
		case err := <-r.done:
			r.done = nil
			t.Fatalf("weir run ended (%v) before %q appeared on stderr:\n%s", err, s, tail(r.stderr.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.kill()
			t.Fatalf("no %q on stderr within 60s:\n%s", s, tail(r.stderr.String()))
		}
	}
}

// stop checks that the run is still going (stuck at a broken table, not
// completed) and SIGKILLs it.
func (r *bgRun) stop(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done = nil
		t.Fatalf("weir run ended (%v) although a table is broken", err)
	case <-time.After(300 * time.Millisecond):
	}
	r.kill()
}

func tail(s string) string { return s[max(0, len(s)-4000):] }

// TestStaticTableBrokenInputs: a table that is a truncated Parquet file,
// and one the process may not read, stop the pipeline at that table with
// an error naming it; the run does not complete. Once the file is fixed,
// the same command completes, and the output is exactly once — the tables
// before the broken one were not read twice, the ones after not skipped.
func TestStaticTableBrokenInputs(t *testing.T) {
	t.Run("truncated-parquet", func(t *testing.T) {
		f := newStaticFixture(t, 4, 800, 30, 5)
		name := brokenTable(t, f)
		orig, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, orig[:len(orig)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		r := startStaticRun(t, f, nil)
		r.waitFor(t, "table "+name+": malformed table: not a readable Parquet file")
		r.stop(t)
		if err := os.WriteFile(name, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		weir(t, "", "run", "--data", f.data, "--spec", f.spec, "--progress", "0")
		f.check(t)
	})
	t.Run("no-read-permission", func(t *testing.T) {
		f := newStaticFixture(t, 4, 800, 30, 6)
		name := brokenTable(t, f)
		if err := os.Chmod(name, 0); err != nil {
			t.Fatal(err)
		}
		var attr *syscall.SysProcAttr
		if os.Getuid() == 0 {
			// root reads anything: run weir as nobody, with the fixture and
			// the binary open to it.
			attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			openToAll(t, filepath.Dir(f.data), filepath.Dir(weirBin))
			if err := os.MkdirAll(f.data, 0o777); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{f.data, f.in} {
				if err := os.Chmod(d, 0o777); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := startStaticRun(t, f, attr)
		r.waitFor(t, "table "+name+" cannot be read: open "+name+": permission denied")
		r.stop(t)
		if err := os.Chmod(name, 0o644); err != nil {
			t.Fatal(err)
		}
		c := exec.Command(weirBin, "run", "--data", f.data, "--spec", f.spec, "--progress", "0")
		c.SysProcAttr = attr
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("rerun after chmod: %v\n%s", err, tail(string(out)))
		}
		f.check(t)
	})
}

// brokenTable is the path of the fixture's third input table.
func brokenTable(t *testing.T, f *staticFixture) string {
	t.Helper()
	es, err := os.ReadDir(f.in)
	if err != nil || len(es) < 3 {
		t.Fatalf("input tables: %v %v", es, err)
	}
	return filepath.Join(f.in, es[2].Name())
}

// openToAll lets every user traverse and read dirs and their parents up
// to the temporary directory.
func openToAll(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		for p := d; p != os.TempDir() && p != "/" && p != "."; p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestStaticTableChangedAfterRead: a pipeline with an infinite source
// reads three tables; then one of them is rewritten and a fourth added.
// The restarted pipeline refuses to start, naming the changed table; with
// the original restored (contents and modification time, as a backup copy
// would be) it reads only the new table: exactly once.
func TestStaticTableChangedAfterRead(t *testing.T) {
	f := newStaticFixture(t, 3, 600, 20, 8)
	f.setFinite(t, false)
	r := startStaticRun(t, f, nil)
	f.waitExact(t, r)
	r.kill()

	name := brokenTable(t, f)
	orig, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(name)
	tabletest.WriteParquetFile(t, name, []tabletest.InputRow{{Key: "k000", I: -1}})
	extra := t.TempDir()
	for k, n := range tabletest.WriteInput(t, extra, 1, 500, 20, 9) {
		f.want[k] += n
	}
	es, _ := os.ReadDir(extra)
	late := strings.Replace(es[0].Name(), "2024-01-01", "2024-02-01", 1)
	if err := os.Rename(filepath.Join(extra, es[0].Name()), filepath.Join(f.in, late)); err != nil {
		t.Fatal(err)
	}

	r = startStaticRun(t, f, nil)
	r.waitFor(t, "table "+name+" changed after it was read")
	r.stop(t)

	if err := os.WriteFile(name, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	r = startStaticRun(t, f, nil)
	f.waitExact(t, r)
	r.kill()
	f.check(t)
}

// setFinite rewrites the fixture's spec with finite = finite.
func (f *staticFixture) setFinite(t *testing.T, finite bool) {
	t.Helper()
	b, err := os.ReadFile(f.spec)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"finite" = %true;`), []byte(fmt.Sprintf(`"finite" = %%%v;`, finite)), 1)
	if err := os.WriteFile(f.spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitExact polls the output until the oracle is satisfied, with a
// real-time bound (an infinite pipeline never completes by itself).
func (f *staticFixture) waitExact(t *testing.T, r *bgRun) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var err error
		if _, serr := os.Stat(filepath.Join(f.out, "_weir_manifest.json")); serr == nil {
			err = tabletest.Exact(tabletest.ReadOutput(t, f.out), f.want)
		} else {
			err = serr
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.kill()
			t.Fatalf("the output is not exact within 90s: %v\n%s", err, tail(r.stderr.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
