// Package flinkbench runs the Flink comparator of 'weir bench': the
// counter example written as a Flink user would write it
// (java/KeyedCount.java) — FileSource → parse → keyBy → a ValueState
// counter on the RocksDB state backend → FileSink, with exactly-once,
// incremental checkpoints — on a local Flink cluster in one JVM, over the
// same events as weir's rows.
//
// The jars come from pom.xml beside this file, fetched by Maven into a
// cache outside the repository (Jars; Jars.Fetcher is the command).
// The issue that set weir's speed goals names a mainstream JVM engine with
// RocksDB state and exactly-once checkpoints as the one to be ahead of;
// this is that engine, measured on the same machine in the same sitting.
package flinkbench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-stream/weir/internal/mavenlibs"
)

// Version is the Apache Flink release measured (pom.xml's flink.version).
const Version = "2.3.0"

// Jars are Flink's jars: in $WEIR_FLINK_LIBS, or weir/flink-<Version>/libs
// under the user's cache directory.
var Jars = mavenlibs.Libs{
	Name: "flink", Version: Version, Env: "WEIR_FLINK_LIBS",
	Pom:     filepath.Join("internal", "flinkbench", "pom.xml"),
	Marker:  "flink-runtime-" + Version + ".jar",
	Fetcher: "go run ./internal/flinkbench/cmd/flinkfetch",
}

//go:embed java/KeyedCount.java
var keyedCountJava []byte

// Config is one run of the comparator.
type Config struct {
	// Input is a directory of JSON-lines files, one event per line, each
	// with a string "key"; Flink reads one split per file.
	Input string
	// Output and State are directories Flink writes: the committed
	// "key,count" files of run i under Output/run-<i>, its checkpoints and
	// RocksDB files under State/run-<i>.
	Output, State string
	// Parallelism of every operator (the machine's CPUs by default: the
	// local cluster's slots, as Flink recommends; 2 beat 4 on 2 cores).
	Parallelism int
	// CheckpointInterval between exactly-once checkpoints (1 s by
	// default). FileSink makes its files visible at checkpoints, so this
	// is also the output's latency.
	CheckpointInterval time.Duration
	// Runs is how many times the job runs, one after another in the one
	// JVM (1 by default). Only the first pays the JIT's warm-up.
	Runs int
	// HeapMB is the JVM's maximum heap (1024 by default).
	HeapMB int
}

// RunFigures are what one run of the job measured inside the JVM.
type RunFigures struct {
	Run int `json:"run"`
	// NetRuntime is Flink's own measure of the job: from its start to its
	// end, the local cluster's start excluded.
	NetRuntime time.Duration `json:"net_runtime_ns"`
	// JobCPU is the CPU time of every thread of the JVM from the job's
	// submission to its result: the job's, and the idle cluster's.
	JobCPU time.Duration `json:"job_cpu_ns"`
}

// Result is a finished comparator process.
type Result struct {
	Runs []RunFigures
	// CPU is the JVM process's CPU time from its start to its exit (all
	// runs, JVM start and compilation included); PeakRSSMiB its peak RSS.
	CPU        time.Duration
	PeakRSSMiB float64
}

// Run runs the comparator in a JVM of its own and waits for it. Flink's
// log goes to State/flink.log.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := Jars.Available(); err != nil {
		return Result{}, fmt.Errorf("the Flink row %w", err)
	}
	classes, err := Jars.Compile("KeyedCount", keyedCountJava)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(cfg.State, 0o755); err != nil {
		return Result{}, err
	}
	logf, err := os.Create(filepath.Join(cfg.State, "flink.log"))
	if err != nil {
		return Result{}, err
	}
	defer logf.Close()
	runs := cmp.Or(cfg.Runs, 1)
	cmd := exec.CommandContext(ctx, "java", fmt.Sprintf("-Xmx%dm", cmp.Or(cfg.HeapMB, 1024)), "-Dlog4j2.level=warn",
		"-cp", Jars.Classpath(classes), "KeyedCount",
		"--input", cfg.Input, "--output", cfg.Output, "--state", cfg.State,
		"--parallelism", strconv.Itoa(cmp.Or(cfg.Parallelism, runtime.NumCPU())),
		"--checkpoint-ms", strconv.FormatInt(cmp.Or(cfg.CheckpointInterval, time.Second).Milliseconds(), 10),
		"--runs", strconv.Itoa(runs))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, logf
	runErr := cmd.Run()
	var res Result
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			res.PeakRSSMiB = float64(ru.Maxrss) / 1024
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("java KeyedCount: %w (its log: %s)", runErr, logf.Name())
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var f RunFigures
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return res, fmt.Errorf("java KeyedCount printed %q: %w", sc.Text(), err)
		}
		res.Runs = append(res.Runs, f)
	}
	if len(res.Runs) != runs {
		return res, fmt.Errorf("java KeyedCount reported %d runs, want %d (its log: %s)", len(res.Runs), runs, logf.Name())
	}
	return res, nil
}

// ReadCounts reads the "key,count" lines of the files FileSink committed
// under dir (run i's Output/run-<i>) into counts per key, unsorted. Files
// still in progress or pending (hidden, named ".part-…") are not
// committed output and are skipped.
func ReadCounts(dir string) (map[string][]int64, error) {
	got := map[string][]int64{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			key, count, ok := strings.Cut(sc.Text(), ",")
			n, err := strconv.ParseInt(count, 10, 64)
			if !ok || err != nil {
				return fmt.Errorf("%s:%d: %q is not key,count", path, line, sc.Text())
			}
			got[key] = append(got[key], n)
		}
		return sc.Err()
	})
	return got, err
}

// EventFiles writes the comparator's input: events as JSON lines, one file
// per partition (part-<p>.jsonl), so that Flink reads the partitions the
// way weir's rows read the partitions of their input queue.
type EventFiles struct {
	files []*os.File
	bufs  []*bufio.Writer
}

// CreateEventFiles creates parts empty files in dir.
func CreateEventFiles(dir string, parts int) (*EventFiles, error) {
	e := &EventFiles{}
	for p := range parts {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d.jsonl", p)))
		if err != nil {
			e.Close()
			return nil, err
		}
		e.files, e.bufs = append(e.files, f), append(e.bufs, bufio.NewWriterSize(f, 1<<16))
	}
	return e, nil
}

// Write appends event, encoded as one JSON line, to partition part's file.
func (e *EventFiles) Write(part int, event any) error {
	b, err := json.Marshal(event)
	if err != nil {
		return err
	}
	w := e.bufs[part]
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.WriteByte('\n')
}

// Close flushes and closes every file, returning the first error.
func (e *EventFiles) Close() error {
	var first error
	for i, f := range e.files {
		if err := e.bufs[i].Flush(); err != nil && first == nil {
			first = err
		}
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
