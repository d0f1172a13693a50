package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/countoracle"
	"github.com/weir-stream/weir/internal/flinkbench"
)

// flinkRow is the bench's row of Apache Flink (internal/flinkbench): the
// counter example as a Flink user writes it, on RocksDB state with
// exactly-once checkpoints every second, run twice in one JVM and measured
// on the second run (a long-running Flink cluster has warmed its JIT).
const flinkRow = "flink " + flinkbench.Version + ": keyed count, RocksDB, EO checkpoints 1 s"

// flinkCase is the Flink row over n messages; it is left out (why is
// returned) where Flink cannot run.
func flinkCase(n int) (benchCase, error) {
	if err := flinkbench.Jars.Available(); err != nil {
		return benchCase{}, fmt.Errorf("the Flink row is left out: it %w", err)
	}
	return benchCase{Name: flinkRow, Kind: "flink", Messages: n, CheckpointMs: 1000, Runs: 2}, nil
}

// benchFlink writes the bench's events as JSON lines, one file per
// partition of the pipeline rows' input queue (the same events, split the
// same way), runs the Flink comparator on them and records its last run:
// msg/s over Flink's net runtime of the job, CPU over the JVM's CPU from
// the job's submission to its result, the JVM's peak RSS. Its committed
// output must pass the keyed counter's exactly-once oracle.
func benchFlink(dir string, c benchCase, res *benchResult) error {
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		return err
	}
	parts := c.inputPartitions()
	ev, err := flinkbench.CreateEventFiles(in, parts)
	if err != nil {
		return err
	}
	want := map[string]int{}
	err = benchEvents(c.Messages, parts, func(rows []weir.Row, ps []int) error {
		for i, row := range rows {
			want[row["key"].(string)]++
			if err := ev.Write(ps[i], row); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := ev.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	runs := max(c.Runs, 1)
	r, err := flinkbench.Run(context.Background(), flinkbench.Config{
		Input: in, Output: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"),
		Parallelism: c.Parallelism, CheckpointInterval: time.Duration(c.CheckpointMs) * time.Millisecond, Runs: runs,
	})
	if err != nil {
		return err
	}
	last := r.Runs[len(r.Runs)-1]
	res.MsgsPerSec = float64(c.Messages) / last.NetRuntime.Seconds()
	res.CPUPerMillion, res.CPUScope = last.JobCPU.Seconds()/float64(c.Messages)*1e6, "run"
	res.PeakRSSMiB = r.PeakRSSMiB
	got, err := flinkbench.ReadCounts(filepath.Join(dir, "out", fmt.Sprintf("run-%d", runs)))
	if err != nil {
		return err
	}
	countoracle.Sort(got)
	if bad := countoracle.Violations(got, want); len(bad) > 0 {
		return fmt.Errorf("the Flink row's committed output is not exactly once (%d keys): %v", len(bad), bad[:min(3, len(bad))])
	}
	return nil
}
