package statictable

// Tests of the sink's publish protocol, driven directly (no engine): a
// simulated computation partition with an outbox, epochs that commit the
// sink state, and crashes injected at every named point of the publish
// sequence. A crash abandons the instance as a killed process would; the
// next instance gets the outbox's unacknowledged messages in id order.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// crashSignal is what the test's crashAt panics with.
type crashSignal struct{ point string }

// partitionSim simulates one partition of a computation feeding the sink.
type partitionSim struct {
	t      *testing.T
	st     store.Store
	clk    *clock.Manual
	out    string
	params map[string]any
	part   string

	outbox []*weir.Message // committed, unacknowledged, id order
	acked  map[msgid.ID]bool
	seq    int
	sink   *Sink
}

func newSim(t *testing.T, params map[string]any) *partitionSim {
	clk := clock.NewManual(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	st, err := pstore.Open(t.TempDir(), pstore.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	out := t.TempDir()
	p := map[string]any{"output_directory": out, "table_period": "10s", "table_ttl": "1h", "close_delay": "1s"}
	for k, v := range params {
		p[k] = v
	}
	return &partitionSim{t: t, st: st, clk: clk, out: out, params: p, part: "Counter/0", acked: map[msgid.ID]bool{}}
}

func (s *partitionSim) stateKey() []byte { return []byte("sinkstate/" + s.part) }

// start builds and initializes a fresh sink instance and hands it the
// outbox, as a restarted job does.
func (s *partitionSim) start() error {
	sk, err := NewSink(connector.SinkParams{SinkID: "out", Path: "computations.Counter.sinks.out", Parameters: s.params}, Options{Logf: s.t.Logf})
	if err != nil {
		return err
	}
	sc := connector.SinkContext{
		Store: s.st, PartitionID: s.part, SinkID: "out",
		LoadState: func(ctx context.Context) ([]byte, error) {
			v, _, err := s.st.Get(ctx, store.PartitionStates, s.stateKey())
			return v, err
		},
		SaveState: func(txn *store.Txn, b []byte) { txn.Put(store.PartitionStates, s.stateKey(), b) },
		Logf:      s.t.Logf,
	}
	if err := sk.Init(context.Background(), sc); err != nil {
		return err
	}
	s.sink = sk
	for _, m := range s.outbox {
		sk.Distribute(m, s.doneFor(m.ID))
	}
	return nil
}

func (s *partitionSim) doneFor(id msgid.ID) func(error) {
	return func(err error) {
		if err != nil {
			s.t.Errorf("delivery of %s failed: %v", id, err)
			return
		}
		s.acked[id] = true
	}
}

// epoch runs one epoch with n new messages: Distribute, Sync, commit (the
// outbox rows and the sink state in one store transaction), Commit, then
// erase acknowledged messages. As in the engine, a message the sink
// acknowledged before the commit (a row spooled by this epoch's Sync) is
// never written to the outbox. A crash panics out of it.
func (s *partitionSim) epoch(n int) {
	ctx := context.Background()
	ts, err := s.st.Timestamp(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var fresh []*weir.Message
	for i := 0; i < n; i++ {
		s.seq++
		m := &weir.Message{ID: msgid.Ordered(uint64(ts), "counts", uint64(i)), Stream: "counts", SystemTimestamp: ts,
			Payload: weir.Row{"key": fmt.Sprintf("k%d", s.seq%7), "n": int64(s.seq)}}
		fresh = append(fresh, m)
		s.sink.Distribute(m, s.doneFor(m.ID))
	}
	var unacked []*weir.Message // what the epoch writes to the outbox
	for _, m := range fresh {
		if !s.acked[m.ID] {
			unacked = append(unacked, m)
		}
	}
	txn := store.NewTxn()
	if err := s.sink.Sync(ctx, txn); err != nil {
		panic(err)
	}
	if err := s.st.Commit(ctx, txn); err != nil {
		s.t.Fatal(err)
	}
	s.outbox = append(s.outbox, unacked...)
	s.sink.Commit(ctx)
	kept := s.outbox[:0]
	for _, m := range s.outbox {
		if !s.acked[m.ID] {
			kept = append(kept, m)
		}
	}
	s.outbox = kept
}

// run drives epochs until total messages were produced, everything is
// acknowledged and in a published table, restarting the sink after each crash. It returns the
// number of crashes.
func (s *partitionSim) run(total, perEpoch int, step time.Duration) (crashes int) {
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
	// As the engine does (connector.Queueing, PendingSync), the partition
	// runs until the open table is published too and its rows have left
	// the spool.
	for rounds := 0; s.seq < total || len(s.outbox) > 0 || s.sink.Queued() > 0 || s.sink.spoolDrop != ""; rounds++ {
		if rounds > 10000 {
			s.t.Fatalf("no progress: %d produced, %d unacknowledged", s.seq, len(s.outbox))
		}
		crashed := func() (crashed bool) {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(crashSignal); !ok {
						panic(r)
					}
					crashed = true
				}
			}()
			n := min(perEpoch, total-s.seq)
			if n == 0 && !s.sink.PendingSync() {
				s.clk.Advance(step)
				return false
			}
			s.epoch(n)
			s.clk.Advance(step)
			return false
		}()
		if crashed {
			crashes++
			if err := s.start(); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	return crashes
}

// readTables reads the manifest's tables with parquet-go and returns the
// "n" of every row, checking each appears once and all of 1..total do.
func (s *partitionSim) check(total int) *manifest {
	s.t.Helper()
	m, ok, err := readManifestFile(s.out)
	if err != nil || !ok {
		s.t.Fatalf("manifest: %v %v", ok, err)
	}
	seen := map[int64]int{}
	for _, tb := range m.Tables {
		type row struct {
			N int64 `parquet:"n,optional"`
		}
		rows, err := pq.ReadFile[row](filepath.Join(s.out, tb.Name))
		if err != nil {
			s.t.Fatalf("table %s: %v", tb.Name, err)
		}
		for _, r := range rows {
			seen[r.N]++
		}
	}
	for i := 1; i <= total; i++ {
		if seen[int64(i)] != 1 {
			s.t.Errorf("message %d is in the output %d times", i, seen[int64(i)])
		}
	}
	if len(seen) != total {
		s.t.Errorf("output holds %d distinct messages, want %d", len(seen), total)
	}
	// Nothing unlisted or temporary is left beside the listed tables.
	listed := m.listed()
	names, _ := os.ReadDir(s.out)
	for _, e := range names {
		n := e.Name()
		if (tableNameRE.MatchString(n) && !listed[n]) || strings.HasPrefix(n, tempPrefix) {
			s.t.Errorf("left behind: %s", n)
		}
	}
	return m
}

// withCrash makes crashAt panic at the nth passage of point.
func withCrash(t *testing.T, point string, nth int) *int {
	hits := new(int)
	old := crashAt
	crashAt = func(p string) {
		if p == point {
			if *hits++; *hits == nth {
				panic(crashSignal{p})
			}
		}
	}
	t.Cleanup(func() { crashAt = old })
	return hits
}

// TestPublishCrashPoints: a crash at each named point of the publish
// sequence, at its first, second and fifth passage, never loses or
// duplicates a message, and leaves no unlisted or temporary file once the
// partition restarted.
func TestPublishCrashPoints(t *testing.T) {
	for _, point := range CrashPoints {
		for _, nth := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%s#%d", point, nth), func(t *testing.T) {
				s := newSim(t, map[string]any{"max_row_count": 40})
				hits := withCrash(t, point, nth)
				crashes := s.run(400, 30, 3*time.Second)
				if crashes != 1 || *hits < nth {
					t.Fatalf("%d crashes, point passed %d times; want exactly one crash", crashes, *hits)
				}
				s.check(400)
			})
		}
	}
}

// TestCrashEveryPublishOnce: a crash at every point of every publish (one
// crash per publish, rotating through the points) — still exactly once.
func TestCrashEveryPublishOnce(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 25})
	old := crashAt
	t.Cleanup(func() { crashAt = old })
	i := 0
	crashAt = func(p string) {
		if p == CrashPoints[i%len(CrashPoints)] {
			i++
			panic(crashSignal{p})
		}
	}
	crashes := s.run(300, 17, 2*time.Second)
	t.Logf("%d crashes", crashes)
	if crashes < 10 {
		t.Fatalf("only %d crashes", crashes)
	}
	s.check(300)
}
