package handwritten

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/statictable/tabletest"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"

	"github.com/weir-stream/weir/internal/testproc"
)

// The kill tests run the loops in child processes of this test binary:
// TestMain turns the binary into the loop when helperEnv names a role.
const helperEnv = "WEIR_HANDWRITTEN_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "queue":
		os.Exit(queueHelper())
	case "kafka":
		os.Exit(kafkaHelper())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helper runs a loop in a child process: it opens the store in
// WEIR_HANDWRITTEN_DIR, prints "ready", and runs loop with the batch of
// WEIR_HANDWRITTEN_BATCH and a function that prints "committed" (the
// parent places its kills between any two commits). It returns the exit
// code.
func helper(loop func(ctx context.Context, st store.Store, batch int, committed func()) error) int {
	batch, err := strconv.Atoi(os.Getenv("WEIR_HANDWRITTEN_BATCH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		return 2
	}
	st, err := pstore.Open(os.Getenv("WEIR_HANDWRITTEN_DIR"), pstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	fmt.Println("ready")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := loop(ctx, st, batch, func() { fmt.Println("committed") }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// queueHelper runs QueueCounter over the queues "events" and "counts".
func queueHelper() int {
	return helper(func(ctx context.Context, st store.Store, batch int, committed func()) error {
		in, err1 := queue.Open(ctx, st, "events")
		out, err2 := queue.Open(ctx, st, "counts")
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		c := QueueCounter{Store: st, In: in, Out: out, Batch: batch, Committed: func(int, uint64) { committed() }}
		_, err := c.Run(ctx)
		return err
	})
}

// writeEvents writes n events over keys keys into a new 4-partition queue
// "events" (split by the hash of "key", as weir's bench splits them) and
// creates the 4-partition output queue "counts". It returns the expected
// count per key.
func writeEvents(t *testing.T, dir string, n, keys int, seed uint64) map[string]int {
	t.Helper()
	st, err := pstore.Open(dir, pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	in, err := queue.Create(ctx, st, "events", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Create(ctx, st, "counts", 4); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int{}
	for i := 0; i < n; i += 1000 {
		var rows []weir.Row
		var parts []int
		for j := i; j < min(i+1000, n); j++ {
			row := weir.Row{"key": fmt.Sprintf("k%04d", r.IntN(keys)), "i": int64(j)}
			want[row["key"].(string)]++
			rows = append(rows, row)
			parts = append(parts, queue.PartitionOf(row, "key", 4, nil))
		}
		if err := in.Write(ctx, rows, parts); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// readQueue opens dir's store read-only and calls fn with the queue name.
func readQueue(t *testing.T, dir, name string, fn func(ctx context.Context, st store.Store, q *queue.Queue)) {
	t.Helper()
	st, err := pstore.Open(dir, pstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	q, err := queue.Open(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	fn(ctx, st, q)
}

// readCounts reads every row of the queue "counts": per key, its counts
// in increasing order.
func readCounts(t *testing.T, dir string) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	readQueue(t, dir, "counts", func(ctx context.Context, _ store.Store, out *queue.Queue) {
		for p := 0; p < out.Partitions(); p++ {
			rows, err := out.Read(ctx, p, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				k, _ := r.Row["key"].(string)
				c, _ := r.Row["count"].(int64)
				got[k] = append(got[k], c)
			}
		}
	})
	for _, c := range got {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return got
}

// committedOffsets returns the loop's committed offset per partition.
func committedOffsets(t *testing.T, dir string) []uint64 {
	t.Helper()
	var offs []uint64
	readQueue(t, dir, "events", func(ctx context.Context, st store.Store, in *queue.Queue) {
		c := QueueCounter{Store: st, In: in}
		offs = make([]uint64, in.Partitions())
		for p := range offs {
			var err error
			if offs[p], err = c.Offset(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	})
	return offs
}

// startHelper starts this test binary as the loop named role with env and
// waits until it printed "ready"; commits counts its "committed" lines and
// done receives its exit.
func startHelper(t *testing.T, role string, env ...string) (cmd *exec.Cmd, commits *atomic.Int64, done chan error) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer // read only after Wait, which ends its copying
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	commits = new(atomic.Int64)
	var sawReady bool
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sawReady = sc.Scan() && sc.Text() == "ready"
		ready <- sawReady
		for sc.Scan() {
			if sc.Text() == "committed" {
				commits.Add(1)
			}
		}
	}()
	done = make(chan error, 1)
	go func() {
		<-scanned // Wait closes the pipe: read it to the end first
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		} else if !sawReady {
			err = fmt.Errorf("the helper exited without printing ready: %s", stderr.String())
		}
		done <- err
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("helper %s did not start: %v", role, <-done)
		}
		return cmd, commits, done
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("helper %s did not print ready within a minute", role)
		return nil, nil, nil
	}
}

// killLoop runs the helper role again and again until a run exits by
// itself after kills kills. Each killed run is SIGKILLed at a random point
// (seeded): once it reported a random number of commits below maxCommits,
// plus a random delay of up to 3 ms, so that kills land anywhere — while a
// batch is built, during a commit's fsync, between commits. progress
// reports the loop's committed position (read while no helper runs) and
// maxCommits the commit budget of a run that starts there; the test fails
// unless some runs made progress before their kill.
func killLoop(t *testing.T, seed uint64, kills int, progress func() int64, maxCommits func(progress int64) int, role string, env ...string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	midway := 0
	for run := 0; ; run++ {
		if run > kills+50 {
			t.Fatalf("the loop did not finish after %d runs", run)
		}
		before := progress()
		cmd, commits, done := startHelper(t, role, env...)
		var kill <-chan time.Time
		if run < kills {
			kill = afterCommits(commits, int64(r.IntN(max(1, maxCommits(before)))), time.Duration(r.Int64N(int64(3*time.Millisecond))))
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			t.Logf("finished after %d kills, %d of them after progress in their run", run, midway)
			if midway == 0 {
				t.Fatal("no killed run made progress: the test proves nothing")
			}
			return
		case <-kill:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			if after := progress(); after > before {
				midway++
			}
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("run %d hung", run)
		}
	}
}

// afterCommits fires delay after commits reached n (polled every 100 µs).
func afterCommits(commits *atomic.Int64, n int64, delay time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for commits.Load() < n {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(delay)
		ch <- time.Now()
	}()
	return ch
}

// TestQueueCounterKilled: the hand-written queue loop, SIGKILLed at random
// moments and restarted until it finishes, emits each key's counts 1..n
// exactly once (the keyed-counter oracle).
func TestQueueCounterKilled(t *testing.T) {
	testproc.SkipUnlessLong(t) // kills a child process 12 times
	for _, tc := range []struct{ batch, events int }{
		{batch: 10, events: 20000},
		{batch: 1000, events: 60000},
	} {
		batch := tc.batch
		t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			want := writeEvents(t, dir, tc.events, 300, uint64(batch))
			sum := func() int64 {
				var n int64
				for _, o := range committedOffsets(t, dir) {
					n += int64(o)
				}
				return n
			}
			// Kill within the first half of the commits left.
			half := func(done int64) int { return (tc.events - int(done)) / batch / 2 }
			killLoop(t, uint64(batch), 12, sum, half, "queue",
				"WEIR_HANDWRITTEN_DIR="+dir, "WEIR_HANDWRITTEN_BATCH="+strconv.Itoa(batch))
			tabletest.CheckExact(t, readCounts(t, dir), want)
		})
	}
}

// TestQueueCounter: one uninterrupted run counts every event once and
// reports how many it processed; a second run finds nothing left.
func TestQueueCounter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	want := writeEvents(t, dir, 5000, 50, 7)
	st, err := pstore.Open(dir, pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, _ := queue.Open(ctx, st, "events")
	out, _ := queue.Open(ctx, st, "counts")
	runTwice(t, 5000, QueueCounter{Store: st, In: in, Out: out, Batch: 64}.Run)
	st.Close()
	tabletest.CheckExact(t, readCounts(t, dir), want)
}

// runTwice runs a loop twice: the first run processes n inputs, the second
// finds nothing left.
func runTwice(t *testing.T, n int, run func(context.Context) (int, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, want := range []int{n, 0} {
		got, err := run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("run %d processed %d inputs, want %d", i, got, want)
		}
	}
}

// TestQueueCounterRejectsBadRows: a row whose key is not a string stops
// the loop with an error naming the queue, partition and row; nothing of
// its batch is committed.
func TestQueueCounterRejectsBadRows(t *testing.T) {
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	in, _ := queue.Create(ctx, st, "events", 1)
	out, _ := queue.Create(ctx, st, "counts", 1)
	if err := in.Write(ctx, []weir.Row{{"key": "a"}, {"key": int64(7)}}, []int{0, 0}); err != nil {
		t.Fatal(err)
	}
	c := QueueCounter{Store: st, In: in, Out: out, Batch: 10}
	_, err = c.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `queue events partition 0 row 1: column "key" is int64`) {
		t.Fatalf("error %v does not name the bad row", err)
	}
	if n, _ := out.Len(ctx, 0); n != 0 {
		t.Fatalf("%d output rows committed from a failed batch", n)
	}
	if off, _ := c.Offset(ctx, 0); off != 0 {
		t.Fatalf("offset %d committed from a failed batch", off)
	}
}
