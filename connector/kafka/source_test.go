package kafka

// Source-level tests of KafkaSource against kfake: Kafka offsets with gaps
// (transaction markers, aborted records), finite ends, the malformed
// message policy, partition filters, and WriteTimestamps that are strictly
// increasing and identical on a re-read from a checkpoint.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

// produceTxn writes values to topic partition 0 in one transaction,
// committed or aborted.
func produceTxn(t testing.TB, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newTestSource(t testing.TB, c brokers, st store.Store, logs *logBuf, params map[string]any) *Source {
	t.Helper()
	p := map[string]any{"brokers": c.ListenAddrs(), "topic": "in", "finite": true}
	for k, v := range params {
		p[k] = v
	}
	if logs == nil {
		logs = &logBuf{}
	}
	s, err := NewSource(connector.SourceParams{SourceID: "events", Path: "computations.Reader.source_streams.events", Parameters: p, Store: st}, testOptions(logs.logf))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads partition key from from until End, in batches of maxRows,
// moving on as the runtime does; it returns the records and the Next of
// the final (empty, End) batch.
func readAll(t testing.TB, s *Source, key string, from connector.Offset, maxRows int) ([]connector.Record, connector.Offset, connector.SourcePartition) {
	t.Helper()
	ctx := context.Background()
	p, err := s.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var out []connector.Record
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := p.Read(ctx, from, maxRows, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Records) > 0 {
			if b.Records[0].Offset < from {
				t.Fatalf("batch from %d starts at %d", from, b.Records[0].Offset)
			}
			if last := b.Records[len(b.Records)-1].Offset; b.Next <= last {
				t.Fatalf("batch Next %d is not past its last record %d", b.Next, last)
			}
		}
		if b.Next < from {
			t.Fatalf("batch Next %d is before its start %d", b.Next, from)
		}
		// As the runtime: only a batch with records moves the position.
		if len(b.Records) > 0 {
			from = b.Next
		}
		out = append(out, b.Records...)
		if b.End && len(b.Records) == 0 {
			return out, b.Next, p
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %s did not end; read %d records up to %d", key, len(out), from)
		}
	}
}

func offsets(recs []connector.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = int64(r.Offset)
	}
	return out
}

// TestSourceOffsetsWithGaps: a read_committed source over a partition with
// committed and aborted transactions returns the Kafka offsets of the
// committed records only; the gaps (markers, aborted records) show as
// offset jumps, and the finite partition ends at the high watermark.
// read_uncommitted sees the aborted records too.
func TestSourceOffsetsWithGaps(t *testing.T) { testSourceOffsetsWithGaps(t, kfakeCluster) }

func testSourceOffsetsWithGaps(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"in": 1})
	txn := newClient(t, c, kgo.TransactionalID("writer"))
	plain := newClient(t, c)
	produceTxn(t, txn, "in", true, `{"key":"a"}`, `{"key":"b"}`, `{"key":"c"}`) // 0-2, marker 3
	produceTxn(t, txn, "in", false, `{"key":"x"}`, `{"key":"y"}`)               // 4-5 aborted, marker 6
	produce(t, plain, &kgo.Record{Topic: "in", Value: []byte(`{"key":"d"}`)})   // 7
	produceTxn(t, txn, "in", true, `{"key":"e"}`)                               // 8, marker 9

	s := newTestSource(t, c, nil, nil, nil)
	keys, err := s.Partitions(context.Background())
	if err != nil || len(keys) != 1 || keys[0] != "in/0" {
		t.Fatalf("Partitions = %v, %v", keys, err)
	}
	for _, maxRows := range []int{1, 2, 100} {
		recs, next, p := readAll(t, s, "in/0", 0, maxRows)
		p.Close()
		if got, want := fmt.Sprint(offsets(recs)), "[0 1 2 7 8]"; got != want {
			t.Fatalf("maxRows %d: offsets %s, want %s", maxRows, got, want)
		}
		if next != 10 {
			t.Fatalf("maxRows %d: ended at %d, want 10 (past the last marker)", maxRows, next)
		}
		var keys []string
		for i, r := range recs {
			keys = append(keys, r.Row["key"].(string))
			if r.Row["$offset"] != int64(r.Offset) || r.Row["$partition"] != int64(0) {
				t.Fatalf("record %d row %v lacks $offset/$partition", i, r.Row)
			}
			if i > 0 && r.WriteTimestamp <= recs[i-1].WriteTimestamp {
				t.Fatalf("WriteTimestamp not increasing at %d: %d after %d", r.Offset, r.WriteTimestamp, recs[i-1].WriteTimestamp)
			}
		}
		if got := strings.Join(keys, ""); got != "abcde" {
			t.Fatalf("keys %q", got)
		}
	}
	su := newTestSource(t, c, nil, nil, map[string]any{"isolation_level": "read_uncommitted"})
	recs, _, p := readAll(t, su, "in/0", 0, 100)
	p.Close()
	if got, want := fmt.Sprint(offsets(recs)), "[0 1 2 4 5 7 8]"; got != want {
		t.Fatalf("read_uncommitted offsets %s, want %s", got, want)
	}
}

// TestSourceTimestampsStable: record times that repeat and go backwards
// become strictly increasing WriteTimestamps (a skipped malformed record
// counts too), and a partition reopened at a committed position (with the checkpoint ReportCommitted stored, or
// without a store, scanning from the start) gives every record the same
// WriteTimestamp as the first read did.
func TestSourceTimestampsStable(t *testing.T) { testSourceTimestampsStable(t, kfakeCluster) }

func testSourceTimestampsStable(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"in": 1})
	plain := newClient(t, c)
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i, d := range []int{5000, 5000, 5000, 1000, 9000, 9900, 2000, 9500, 100, 9999} {
		v := fmt.Sprintf(`{"key":"k%d"}`, i)
		if i == 5 {
			v = "malformed, skipped, and still counted in the floor"
		}
		recs = append(recs, &kgo.Record{Topic: "in", Value: []byte(v), Timestamp: base.Add(time.Duration(d) * time.Millisecond)})
	}
	produce(t, plain, recs...)

	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	skip := map[string]any{"malformed_message_policy": "skip"}
	s := newTestSource(t, c, st, nil, skip)
	if _, err := s.Partitions(context.Background()); err != nil {
		t.Fatal(err)
	}
	first, _, p := readAll(t, s, "in/0", 0, 3)
	ts := map[connector.Offset]store.Timestamp{}
	for i, r := range first {
		ts[r.Offset] = r.WriteTimestamp
		if i > 0 && r.WriteTimestamp <= first[i-1].WriteTimestamp {
			t.Fatalf("WriteTimestamp not increasing at %d", r.Offset)
		}
		if r.WriteTimestamp < recordTimestamp(r.EventTimestamp) {
			t.Fatalf("WriteTimestamp below the record time at %d", r.Offset)
		}
	}
	if err := p.ReportCommitted(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	p.Close()
	for _, tc := range []struct {
		name string
		st   store.Store
		from connector.Offset
	}{{"checkpoint", st, 6}, {"checkpoint-behind", st, 8}, {"no-store", nil, 4}} {
		s2 := newTestSource(t, c, tc.st, nil, skip)
		again, _, p := readAll(t, s2, "in/0", tc.from, 2)
		p.Close()
		want := 0
		for _, r := range first {
			if r.Offset >= tc.from {
				want++
			}
		}
		if len(again) != want {
			t.Fatalf("%s: re-read %d records from %d, want %d", tc.name, len(again), tc.from, want)
		}
		for _, r := range again {
			if r.WriteTimestamp != ts[r.Offset] {
				t.Fatalf("%s: offset %d re-read with WriteTimestamp %d, first read %d", tc.name, r.Offset, r.WriteTimestamp, ts[r.Offset])
			}
		}
	}
}

// TestSourceMalformed: with malformed_message_policy = fail a value that
// is not a JSON object stops the read with an error naming topic,
// partition and offset; with skip it is logged and skipped (a gap).
func TestSourceMalformed(t *testing.T) { testSourceMalformed(t, kfakeCluster) }

func testSourceMalformed(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"in": 1})
	produce(t, newClient(t, c),
		&kgo.Record{Topic: "in", Value: []byte(`{"key":"a"}`)},
		&kgo.Record{Topic: "in", Value: []byte(`not json`)},
		&kgo.Record{Topic: "in", Value: []byte(`{"key":"b"}`)})

	s := newTestSource(t, c, nil, nil, nil)
	p, err := s.Open(context.Background(), "in/0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var readErr error
	from := connector.Offset(0)
	for i := 0; i < 100 && readErr == nil; i++ {
		var b connector.Batch
		b, readErr = p.Read(context.Background(), from, 10, 1<<20)
		from = b.Next
	}
	if readErr == nil || !strings.Contains(readErr.Error(), "topic in partition 0 offset 1") || !strings.Contains(readErr.Error(), "malformed") {
		t.Fatalf("read error %v, want one naming topic in partition 0 offset 1", readErr)
	}

	logs := &logBuf{}
	s = newTestSource(t, c, nil, logs, map[string]any{"malformed_message_policy": "skip"})
	recs, next, p2 := readAll(t, s, "in/0", 0, 10)
	p2.Close()
	if got := fmt.Sprint(offsets(recs)); got != "[0 2]" || next != 3 {
		t.Fatalf("skip: offsets %s next %d, want [0 2] and 3", got, next)
	}
	if !strings.Contains(logs.String(), "offset 1: skipping malformed message") {
		t.Fatalf("no log line for the skipped message:\n%s", logs)
	}
}

// TestSourceRawAndFilter: format = raw gives key and value bytes;
// partition_filter restricts the listed partitions and Open.
func TestSourceRawAndFilter(t *testing.T) {
	c := newCluster(t, map[string]int32{"in": 4})
	produce(t, newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())), &kgo.Record{Topic: "in", Partition: 2, Key: []byte("k"), Value: []byte{0xff, 0},
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
	s := newTestSource(t, c, nil, nil, map[string]any{"format": "raw", "partition_filter": []any{1, 3}})
	keys, err := s.Partitions(context.Background())
	if err != nil || fmt.Sprint(keys) != "[in/1 in/2]" {
		t.Fatalf("Partitions = %v, %v", keys, err)
	}
	if _, err := s.Open(context.Background(), "in/0"); err == nil {
		t.Fatal("Open of a filtered-out partition succeeded")
	}
	recs, _, p := readAll(t, s, "in/2", 0, 10)
	p.Close()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	row := recs[0].Row
	if string(row["key"].([]byte)) != "k" || string(row["value"].([]byte)) != "\xff\x00" || string(row["$headers"].(map[string]any)["h"].([]byte)) != "v" {
		t.Fatalf("raw row %v", row)
	}
}

// TestSourcePartitionCountChange: partitions added to the topic after the
// layout are reported in the log (they are read only after a restart).
func TestSourcePartitionCountChange(t *testing.T) { testSourcePartitionCountChange(t, kfakeCluster) }

func testSourcePartitionCountChange(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"in": 2})
	logs := &logBuf{}
	o := testOptions(logs.logf)
	o.ClientOpts = append(o.ClientOpts, kgo.MetadataMinAge(10*time.Millisecond))
	s, err := NewSource(connector.SourceParams{SourceID: "events", Path: "computations.Reader.source_streams.events",
		Parameters: map[string]any{"brokers": c.ListenAddrs(), "topic": "in", "update_partition_count_period": 1}}, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Partitions(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.Open(ctx, "in/0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Read(ctx, 0, 10, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(newClient(t, c)).CreatePartitions(ctx, 2, "in"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		time.Sleep(5 * time.Millisecond)
		if _, err := p.Read(ctx, 0, 10, 1<<20); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(logs.String(), "topic in now has 4 partitions; the pipeline reads partitions [0, 2)")
	})
}

// TestGroupOffsetOnlyMovesForward: the offset committed to group_id is a
// lag report made after the epoch commit, without the job's lease; a job
// replaced while it still runs (a zombie) reports an older offset late,
// and that must not move the group's offset back.
func TestGroupOffsetOnlyMovesForward(t *testing.T) { testGroupOffsetOnlyMovesForward(t, kfakeCluster) }

func testGroupOffsetOnlyMovesForward(t *testing.T, newC clusterFunc) {
	ctx := context.Background()
	c := newC(t, map[string]int32{"in": 1})
	plain := newClient(t, c)
	for i := 0; i < 20; i++ {
		produce(t, plain, &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf(`{"key":"k%d"}`, i))})
	}
	s := newTestSource(t, c, nil, nil, map[string]any{"group_id": "lag", "finite": false})
	if _, err := s.Partitions(ctx); err != nil {
		t.Fatal(err)
	}
	_, next, current := readAll(t, s, "in/0", 0, 100)
	defer current.Close()
	zombie, err := s.Open(ctx, "in/0")
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	// One poll may return nothing within poll_timeout on a loaded machine:
	// read until the records come.
	var b connector.Batch
	waitFor(t, func() bool {
		b, err = zombie.Read(ctx, 0, 5, 1<<20)
		if err != nil {
			t.Fatalf("zombie read: %v", err)
		}
		return len(b.Records) > 0
	})
	if len(b.Records) != 5 {
		t.Fatalf("zombie read: %d records, want 5", len(b.Records))
	}
	if err := current.ReportCommitted(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ReportCommitted(ctx, b.Next); err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(newClient(t, c)).FetchOffsets(ctx, "lag")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup("in", 0)
	if !ok || o.At != int64(next) {
		t.Fatalf("group offset = %+v (found %v), want %d: the zombie's %d moved it back", o, ok, next, b.Next)
	}
}

// TestSourceUnreachableBrokersFailRead (issue 13 item 2): once the brokers
// cannot be reached, a poll returns neither records nor an error; an
// infinite source partition must not look caught up forever. Within the
// reachability period a read fails with the dial error, so that the job
// fails visibly and is restarted with backoff; while the brokers answer,
// an idle partition's reads do not fail. (A finite partition asks for its
// end offset when it starts reading: with the brokers gone, that read
// fails too.)
func TestSourceUnreachableBrokersFailRead(t *testing.T) {
	for _, finite := range []bool{false, true} {
		t.Run(fmt.Sprintf("finite=%v", finite), func(t *testing.T) {
			c := newCluster(t, map[string]int32{"in": 1})
			cl := newClient(t, c)
			for i := 0; i < 3; i++ {
				produce(t, cl, &kgo.Record{Topic: "in", Partition: 0, Value: []byte(fmt.Sprintf(`{"i": %d}`, i))})
			}
			st, err := pstore.Open(t.TempDir(), pstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			o := testOptions((&logBuf{}).logf)
			o.ReachabilityPeriod = 200 * time.Millisecond
			s, err := NewSource(connector.SourceParams{SourceID: "events", Path: "computations.Reader.source_streams.events",
				Parameters: map[string]any{"brokers": c.ListenAddrs(), "topic": "in", "finite": finite}, Store: st}, o)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			p, err := s.Open(ctx, "in/0")
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var next connector.Offset
			if !finite {
				// Read everything; then idle polls across several
				// reachability periods do not fail.
				for n := 0; n < 3; {
					b, err := p.Read(ctx, next, 10, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					if len(b.Records) > 0 {
						n, next = n+len(b.Records), b.Next
					}
				}
				for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
					if _, err := p.Read(ctx, next, 10, 1<<20); err != nil {
						t.Fatalf("an idle partition with reachable brokers failed a read: %v", err)
					}
				}
			}
			c.Close()
			deadline := time.Now().Add(30 * time.Second)
			for {
				b, err := p.Read(ctx, next, 10, 1<<20)
				if err != nil {
					if !strings.Contains(err.Error(), "connection refused") {
						t.Fatalf("read error %v does not say the brokers cannot be reached", err)
					}
					t.Logf("read fails: %v", err)
					return
				}
				if len(b.Records) > 0 {
					t.Fatalf("read %d records from a closed cluster", len(b.Records))
				}
				if time.Now().After(deadline) {
					t.Fatal("reads with unreachable brokers returned no error for 30s")
				}
			}
		})
	}
}

// TestGroupOffsetFlushRetried: a broker that has just restarted answers
// offset commits with UNKNOWN_TOPIC_OR_PARTITION for a while (seen on a
// real broker SIGKILLed mid-run: the group stayed at the start of every
// partition). The report that meets it fails; closing the partition
// commits the group offset once the broker answers again.
func TestGroupOffsetFlushRetried(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, map[string]int32{"in": 1})
	plain := newClient(t, c)
	for i := 0; i < 5; i++ {
		produce(t, plain, &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf(`{"key":"k%d"}`, i))})
	}
	s := newTestSource(t, c, nil, nil, map[string]any{"group_id": "lag"})
	if _, err := s.Partitions(ctx); err != nil {
		t.Fatal(err)
	}
	_, next, p := readAll(t, s, "in/0", 0, 100)
	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.UnknownTopicOrPartition, Count: 4})
	defer fault.Remove()
	if err := p.ReportCommitted(ctx, next); err == nil {
		t.Fatal("the report met no injected error: the test proves nothing")
	}
	p.Close()
	offs, err := kadm.NewClient(newClient(t, c)).FetchOffsets(ctx, "lag")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("in", 0); !ok || o.At != int64(next) {
		t.Fatalf("group offset %+v (found %v) after close, want %d", o, ok, next)
	}
}
