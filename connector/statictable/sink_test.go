package statictable

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// TestZombiePublishWritesOnlyTheTail: two instances of one partition (a
// replaced job's zombie and its replacement) hold the same outbox. The
// zombie publishes first; the replacement's publish finds the frontier
// moved, drops what it covers and writes only the uncovered tail, without
// restarting. Every message is in the output once.
func TestZombiePublishWritesOnlyTheTail(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 1000})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s.epoch(20) // 60 messages in the zombie's open table
	}
	zombie := s.sink
	if err := s.start(); err != nil { // the replacement, with the outbox
		t.Fatal(err)
	}
	s.epoch(15) // the replacement holds 75 messages; the zombie 60
	// The slot ends: the zombie publishes its 60 messages first.
	s.clk.Advance(20 * time.Second)
	zombie.Commit(context.Background())
	if err := zombie.Failure(); err != nil {
		t.Fatal(err)
	}
	before := testCounter(t, s.sink.mConflicts)
	for i := 0; i < 4; i++ {
		s.epoch(0)
	}
	if err := s.sink.Failure(); err != nil {
		t.Fatalf("the replacement stopped: %v", err)
	}
	if got := testCounter(t, s.sink.mConflicts) - before; got != 1 {
		t.Errorf("%v frontier conflicts, want 1", got)
	}
	if len(s.outbox) != 0 {
		t.Fatalf("%d messages unacknowledged", len(s.outbox))
	}
	m := s.check(75)
	if len(m.Tables) != 2 || m.Tables[0].Rows != 60 || m.Tables[1].Rows != 15 {
		t.Errorf("tables %+v: want the zombie's 60 rows, then the replacement's tail of 15", m.Tables)
	}
}

// TestProgressLost: a deleted manifest, or one restored from an older
// copy, stops the sink at Init with ErrProgressLost instead of writing
// duplicates.
func TestProgressLost(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 10})
	s.run(25, 10, 5*time.Second)
	old, err := os.ReadFile(filepath.Join(s.out, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	s.seq = 25
	s.run(60, 10, 5*time.Second)
	if err := os.WriteFile(filepath.Join(s.out, manifestName), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.start(); !errors.Is(err, ErrProgressLost) {
		t.Fatalf("restored old manifest: Init = %v, want ErrProgressLost", err)
	}
	os.Remove(filepath.Join(s.out, manifestName))
	if err := s.start(); !errors.Is(err, ErrProgressLost) {
		t.Fatalf("deleted manifest: Init = %v, want ErrProgressLost", err)
	}
}

// TestOtherOwnerRefused: a second pipeline pointed at the same output
// directory is refused.
func TestOtherOwnerRefused(t *testing.T) {
	a := newSim(t, nil)
	a.run(5, 5, 5*time.Second)
	b := newSim(t, map[string]any{"output_directory": a.out})
	if err := b.start(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Init = %v, want ErrNotOwner", err)
	}
}

// TestEmptySlotsAndExpiry: a gap of whole slots between rows gets empty
// tables (the later row proves the watermark passed them), and tables are
// removed from the manifest and the disk at their expiry.
func TestEmptySlotsAndExpiry(t *testing.T) {
	s := newSim(t, map[string]any{"table_ttl": "2m"})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	s.epoch(5) // slot 12:00:00
	s.clk.Advance(12 * time.Second)
	s.epoch(0) // slot ended, idle for close_delay: published
	s.clk.Advance(25 * time.Second)
	s.epoch(5) // slot 12:00:30: slots :10 and :20 are empty
	s.clk.Advance(12 * time.Second)
	for i := 0; i < 3; i++ {
		s.epoch(0)
	}
	m, _, err := readManifestFile(s.out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tb := range m.sortedTables() {
		got = append(got, tb.Slot.Format("15:04:05")+":"+itoa(tb.Rows))
	}
	want := []string{"12:00:00:5", "12:00:10:0", "12:00:20:0", "12:00:30:5"}
	if len(got) != len(want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tables %v, want %v", got, want)
		}
	}
	s.check(10)
	// Two minutes later every table has expired.
	s.clk.Advance(3 * time.Minute)
	for i := 0; i < 2; i++ {
		s.epoch(0)
	}
	m, _, _ = readManifestFile(s.out)
	if len(m.Tables) != 0 {
		t.Errorf("after table_ttl the manifest still lists %d tables", len(m.Tables))
	}
	es, _ := os.ReadDir(s.out)
	for _, e := range es {
		if tableNameRE.MatchString(e.Name()) {
			t.Errorf("expired table %s is still on disk", e.Name())
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func testCounter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// TestRowRefusedNamesTheWayOut (issue 23 item 11): a row whose value does
// not fit the sink's declared columns stops the sink with an error naming
// the message, the column and the output directory, and saying that the
// output stays in the outbox until the sink's columns accept it.
func TestRowRefusedNamesTheWayOut(t *testing.T) {
	s := newSim(t, map[string]any{"columns": []any{
		map[string]any{"name": "key", "type": "string"},
		map[string]any{"name": "n", "type": "string"},
	}})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	s.epoch(3)
	s.clk.Advance(20 * time.Second) // the slot ends: the table is published
	s.sink.Commit(context.Background())
	err := s.sink.Failure()
	for _, want := range []string{`column "n"`, "message ", "output directory " + s.out, "change the sink's columns", "weir statictable skip"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("failure %v does not say %q", err, want)
		}
	}
	if !errors.Is(err, errRowRefused) {
		t.Errorf("failure %v is not errRowRefused", err)
	}
}

// TestSpooledRowsLeaveTheOutbox: a message that joins the open table is
// spooled (in the pipeline's store) by the Sync of the epoch that emitted
// it and acknowledged by that epoch's commit, long before its table is
// published: the computation's outbox never writes it, nor holds a whole
// open table (max_row_count rows per partition, in memory). A restart
// then finds the rows in the spool and publishes each once; and the
// sink's recorded state is version 2, which a weir without the spool
// refuses.
func TestSpooledRowsLeaveTheOutbox(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 1000})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		s.epoch(20)
	}
	if m, ok, _ := readManifestFile(s.out); ok && len(m.Tables) > 0 {
		t.Fatalf("a table was published: %+v", m.Tables)
	}
	if len(s.outbox) != 0 || len(s.acked) != 100 {
		t.Fatalf("%d messages in the outbox, %d acknowledged; want 0 and 100 (acknowledged with the epoch that spooled them)", len(s.outbox), len(s.acked))
	}
	if q := s.sink.Queued(); q != 100 {
		t.Fatalf("Queued() = %d, want the open table's 100 rows", q)
	}
	v, _, err := s.st.Get(context.Background(), store.PartitionStates, s.stateKey())
	if err != nil || len(v) == 0 || v[0] != sinkStateVersion || sinkStateVersion != 2 {
		t.Fatalf("sink state %x (%v): want version 2", v, err)
	}
	// A restart (the instance abandoned): the rows are only in the spool.
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if q := s.sink.Queued(); q != 100 {
		t.Fatalf("after the restart Queued() = %d, want the 100 spooled rows", q)
	}
	s.run(150, 20, 3*time.Second)
	s.check(150)
	// The published rows left the spool.
	if b := s.spoolBatches(); len(b) != 0 {
		t.Errorf("batches %v left in the spool", b)
	}
}

// TestRowThatClosesTheTableWaitsForTheCommit: a row that would close the
// open table (here: it is full) is not spooled and acknowledged with its
// epoch, nor is any later row of that epoch: they wait in the outbox for
// the commit, whose Commit publishes the full table first. Publishing
// takes committed rows only, and the spool above the frontier holds the
// open table alone.
func TestRowThatClosesTheTableWaitsForTheCommit(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 30})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	s.epoch(20)
	s.epoch(20) // 21..30 join the table; 31 would close it
	if len(s.outbox) != 10 || s.acked[s.outbox[0].ID] {
		t.Fatalf("%d messages in the outbox, want the 10 after the full table", len(s.outbox))
	}
	m, ok, err := readManifestFile(s.out)
	if err != nil || !ok || len(m.Tables) != 1 || m.Tables[0].Rows != 30 {
		t.Fatalf("manifest %+v (%v, %v): want one table of 30 rows, published at the commit", m, ok, err)
	}
	if q := s.sink.Queued(); q != 10 {
		t.Fatalf("Queued() = %d, want the next table's 10 rows", q)
	}
	s.run(100, 20, 3*time.Second)
	s.check(100)
}

// TestSinkJSONLTablesFromSpool: JSON Lines tables are written from the
// spool as Parquet ones are — every message once, across restarts.
func TestSinkJSONLTablesFromSpool(t *testing.T) {
	s := newSim(t, map[string]any{"max_row_count": 40, "format": "jsonl"})
	withCrash(t, CrashTempComplete, 2)
	if crashes := s.run(200, 15, 3*time.Second); crashes != 1 {
		t.Fatalf("%d crashes, want 1", crashes)
	}
	m, ok, err := readManifestFile(s.out)
	if err != nil || !ok {
		t.Fatalf("manifest: %v %v", ok, err)
	}
	seen := map[int64]int{}
	for _, tb := range m.Tables {
		b, err := os.ReadFile(filepath.Join(s.out, tb.Name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var r struct{ N int64 }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %q: %v", tb.Name, line, err)
			}
			seen[r.N]++
		}
	}
	for i := int64(1); i <= 200; i++ {
		if seen[i] != 1 {
			t.Errorf("message %d is in the output %d times", i, seen[i])
		}
	}
}

// spoolBatches returns the last ids of the batches in the partition's
// spool (its store rows' keys), in order.
func (s *partitionSim) spoolBatches() []msgid.ID {
	s.t.Helper()
	var ids []msgid.ID
	pre := spoolPrefix(s.sink.path, s.part)
	err := s.st.Scan(context.Background(), store.Range{Table: catalogTable, Lo: pre, Hi: tables.PrefixEnd(pre)}, func(k, _ []byte) bool {
		ids = append(ids, msgid.ID(k[len(pre):]))
		return true
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return ids
}

// TestSpoolAcrossACrashInPublish: a crash at each point of a publish of
// spooled rows. Before the manifest's rename, the next instance rebuilds
// the open table from the spool (the outbox no longer holds its rows) and
// publishes it; after it, Init finds the spool at or below the frontier
// and the next Sync deletes it. Either way every message is published
// once and the spool ends empty.
func TestSpoolAcrossACrashInPublish(t *testing.T) {
	for _, point := range CrashPoints {
		t.Run(point, func(t *testing.T) {
			s := newSim(t, map[string]any{"max_row_count": 1000})
			withCrash(t, point, 1) // the only publish: the slot's end
			if crashes := s.run(60, 20, 3*time.Second); crashes != 1 {
				t.Fatalf("%d crashes, want 1", crashes)
			}
			s.check(60)
			if b := s.spoolBatches(); len(b) != 0 {
				t.Errorf("batches %v left in the spool", b)
			}
		})
	}
}

// TestSpoolRebuiltAboveTheFrontier: the spool holds batches at or below the
// frontier, and one the frontier cuts (another instance, a zombie,
// published part of its rows). A restarted instance's open table is the
// rows above the frontier only; its first Sync deletes the batches at or
// below it and keeps the one the frontier cuts; the rest is published
// once.
func TestSpoolRebuiltAboveTheFrontier(t *testing.T) {
	ctx := context.Background()
	s := newSim(t, map[string]any{"max_row_count": 1000})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	s.epoch(20) // spooled: the batches of messages 1..20 and 21..40
	s.epoch(20)
	// Messages 41..60 are of the next slot: they wait for the commit, which
	// publishes 1..40 and opens a table for them (not spooled yet).
	s.clk.Advance(10 * time.Second)
	s.epoch(20)
	zombie := s.sink
	if err := s.start(); err != nil { // the replacement: the outbox hands it 41..60
		t.Fatal(err)
	}
	// Its first Sync deletes the batches at or below the frontier (1..40)
	// and spools 41..75 as one batch.
	s.epoch(15)
	if b := s.spoolBatches(); len(b) != 1 || b[0] != s.sink.spoolHigh {
		t.Fatalf("spool batches %v, want only 41..75 (%s)", b, s.sink.spoolHigh)
	}
	zombie.Progress(connector.Progress{Draining: true})
	zombie.Commit(ctx) // the zombie publishes messages 41..60: the frontier cuts the batch
	if err := zombie.Failure(); err != nil {
		t.Fatal(err)
	}
	if err := s.start(); err != nil { // a restart
		t.Fatal(err)
	}
	if q := s.sink.Queued(); q != 15 {
		t.Fatalf("the rebuilt open table has %d rows, want the 15 above the frontier", q)
	}
	s.epoch(0)
	if b := s.spoolBatches(); len(b) != 1 || b[0] != s.sink.spoolHigh {
		t.Fatalf("spool batches %v after the first Sync, want only the one the frontier cuts (%s)", b, s.sink.spoolHigh)
	}
	s.clk.Advance(20 * time.Second)
	s.run(75, 20, 3*time.Second)
	m := s.check(75)
	if len(m.Tables) != 3 || m.Tables[0].Rows != 40 || m.Tables[1].Rows != 20 || m.Tables[2].Rows != 15 {
		t.Errorf("tables %+v: want the first slot's 40 rows, the zombie's 20 of the next, then the tail of 15", m.Tables)
	}
	if b := s.spoolBatches(); len(b) != 0 {
		t.Errorf("batches %v left in the spool", b)
	}
}

// TestSinkStateVersion1: a partition recorded by a weir without the spool
// (state version 1, its open table in the outbox) goes on: Init takes its
// frontier, and the first Sync that spools rows records version 2, which
// that older weir refuses. An unknown version stops Init.
func TestSinkStateVersion1(t *testing.T) {
	ctx := context.Background()
	s := newSim(t, map[string]any{"max_row_count": 30})
	s.run(40, 10, 3*time.Second)
	v, _, err := s.st.Get(ctx, store.PartitionStates, s.stateKey())
	if err != nil || len(v) == 0 {
		t.Fatalf("sink state %x (%v)", v, err)
	}
	put := func(b []byte) {
		txn := store.NewTxn()
		txn.Put(store.PartitionStates, s.stateKey(), b)
		if err := s.st.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	put(append([]byte{1}, v[1:]...))
	if err := s.start(); err != nil {
		t.Fatalf("a version 1 state: %v", err)
	}
	if got := s.sink.recordedID; got != s.sink.base.MessageID || got == "" {
		t.Fatalf("recorded frontier %q, want the manifest's %q", got, s.sink.base.MessageID)
	}
	s.epoch(10)
	s.epoch(0) // spools the 10 rows
	if v, _, _ := s.st.Get(ctx, store.PartitionStates, s.stateKey()); len(v) == 0 || v[0] != 2 {
		t.Fatalf("sink state %x once rows are spooled: want version 2", v)
	}
	s.run(60, 10, 3*time.Second)
	s.check(60)
	put(append([]byte{3}, v[1:]...))
	if err := s.start(); err == nil || !strings.Contains(err.Error(), "state version") {
		t.Fatalf("a version 3 state: Init = %v, want the unknown version refused", err)
	}
}

// TestSpooledRowsMissing: a publish that finds the open table's spooled
// rows gone from the store stops the sink with ErrProgressLost (the outbox
// no longer holds them) rather than publish a table without them.
func TestSpooledRowsMissing(t *testing.T) {
	ctx := context.Background()
	s := newSim(t, map[string]any{"max_row_count": 1000})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	s.epoch(20)
	s.epoch(0) // spools the 20 rows and acknowledges them
	if len(s.outbox) != 0 || len(s.spoolBatches()) != 1 {
		t.Fatalf("%d messages in the outbox, spool batches %v: want 0 and 1", len(s.outbox), s.spoolBatches())
	}
	pre := spoolPrefix(s.sink.path, s.part)
	txn := store.NewTxn()
	txn.DeleteRange(catalogTable, pre, tables.PrefixEnd(pre))
	if err := s.st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	s.clk.Advance(20 * time.Second)
	s.epoch(0) // the slot ended: the publish
	if err := s.sink.Failure(); !errors.Is(err, ErrProgressLost) {
		t.Fatalf("failure %v, want ErrProgressLost", err)
	}
	if m, ok, _ := readManifestFile(s.out); ok && len(m.Tables) > 0 {
		t.Errorf("tables published without the spooled rows: %+v", m.Tables)
	}
}
