package flinkbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/countoracle"
	"github.com/weir-stream/weir/internal/testproc"
)

// TestReadCounts: committed files are read, files Flink has not committed
// (hidden in-progress and pending ones) are not, and a line that is not
// key,count is an error naming its file and line.
func TestReadCounts(t *testing.T) {
	dir := t.TempDir()
	bucket := filepath.Join(dir, "2026-12-07--15")
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bucket, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("part-a-0", "k1,1\nk2,1\n")
	write("part-b-0", "k1,2\n")
	write(".part-c-0.inprogress.0", "k1,3\n")
	got, err := ReadCounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	countoracle.Sort(got)
	if bad := countoracle.Violations(got, map[string]int{"k1": 2, "k2": 1}); len(bad) > 0 {
		t.Errorf("read %v: %v", got, bad)
	}
	write("part-d-0", "k3,1\nno comma\n")
	if _, err := ReadCounts(dir); err == nil || !strings.Contains(err.Error(), "part-d-0:2") {
		t.Errorf("a bad line: %v, want an error naming part-d-0:2", err)
	}
}

// TestKeyedCountExactlyOnce runs the comparator on a real local Flink
// cluster and checks its committed output with the keyed counter's
// oracle: the Flink row of the bench measures a job that really is
// exactly once, and counts what weir's rows count.
func TestKeyedCountExactlyOnce(t *testing.T) {
	if err := Jars.Available(); err != nil {
		testproc.Missing(t, "the Flink comparator "+err.Error())
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	ev, err := CreateEventFiles(in, 4)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	want := map[string]int{}
	r := rand.New(rand.NewPCG(7, 7))
	for i := range n {
		k := fmt.Sprintf("user-%03d", r.IntN(300))
		want[k]++
		if err := ev.Write(r.IntN(4), map[string]any{"key": k, "ms": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Input: in, Output: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"),
		CheckpointInterval: 100 * time.Millisecond, HeapMB: 512})
	if err != nil {
		t.Fatalf("%v\n%s", err, testproc.Tail(filepath.Join(dir, "state", "flink.log")))
	}
	if len(res.Runs) != 1 || res.Runs[0].NetRuntime <= 0 || res.Runs[0].JobCPU <= 0 || res.CPU <= 0 || res.PeakRSSMiB <= 0 {
		t.Errorf("figures %+v", res)
	}
	got, err := ReadCounts(filepath.Join(dir, "out", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	countoracle.Sort(got)
	if bad := countoracle.Violations(got, want); len(bad) > 0 {
		t.Errorf("Flink's committed output is not exactly once (%d keys wrong): %v", len(bad), bad[:min(5, len(bad))])
	}
}
