package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
	pstore "github.com/weir-stream/weir/store/pebble"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCreateOpen: queues are created once; opening a missing queue names
// it and says how to create it; bad names and counts are refused.
func TestCreateOpen(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if _, err := Create(ctx, st, "events", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, st, "events", 3); !errors.Is(err, ErrExists) {
		t.Fatalf("second create = %v, want ErrExists", err)
	}
	q, err := Open(ctx, st, "events")
	if err != nil || q.Partitions() != 3 {
		t.Fatalf("open = %v, %v", q, err)
	}
	_, err = Open(ctx, st, "nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "weir queue create") {
		t.Fatalf("open missing = %v", err)
	}
	for _, bad := range []struct {
		name string
		n    int
	}{{"", 1}, {"a b", 1}, {"x", 0}, {"x", MaxPartitions + 1}} {
		if _, err := Create(ctx, st, bad.name, bad.n); err == nil {
			t.Errorf("Create(%q, %d) succeeded", bad.name, bad.n)
		}
	}
	all, err := List(ctx, st)
	if err != nil || len(all) != 1 || all["events"] != 3 {
		t.Fatalf("List = %v, %v", all, err)
	}
}

// TestWriteRead: rows get dense row indexes per partition and increasing
// timestamps; reads return the queue columns; $-columns are reserved; a
// bad row rejects the whole write.
func TestWriteRead(t *testing.T) {
	ctx := context.Background()
	q, err := Create(ctx, openStore(t), "q", 2)
	if err != nil {
		t.Fatal(err)
	}
	rows := []weir.Row{{"a": int64(1)}, {"a": int64(2)}, {"a": int64(3)}}
	if err := q.Write(ctx, rows, []int{0, 1, 0}); err != nil {
		t.Fatal(err)
	}
	got, err := q.Read(ctx, 0, 0, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("read p0 = %v, %v", got, err)
	}
	c := got[1].Columns()
	if c[ColRowIndex] != int64(1) || c[ColTabletIndex] != int64(0) || c["a"] != int64(3) || got[1].Timestamp <= got[0].Timestamp {
		t.Fatalf("row columns %v", c)
	}
	if err := q.Write(ctx, []weir.Row{{"ok": true}, {"$row_index": 5}}, []int{0, 0}); err == nil {
		t.Fatal("a row setting $row_index was accepted")
	}
	if n, _ := q.Len(ctx, 0); n != 2 {
		t.Fatalf("a rejected write left rows behind: partition 0 has %d rows", n)
	}
	if err := q.Write(ctx, []weir.Row{{"x": 1}}, []int{7}); err == nil {
		t.Fatal("partition out of range accepted")
	}
}

// TestProducerDedup: a producer write repeating sequence numbers the queue
// holds adds nothing; a partly repeated write adds only the new tail; a
// concurrent retry of the same write lands once.
func TestProducerDedup(t *testing.T) {
	ctx := context.Background()
	q, err := Create(ctx, openStore(t), "q", 1)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(n int) []weir.Row {
		r := make([]weir.Row, n)
		for i := range r {
			r[i] = weir.Row{"i": int64(i)}
		}
		return r
	}
	zero := func(n int) []int { return make([]int, n) }
	if n, err := q.WriteAsProducer(ctx, "p1", 1, rows(3), zero(3)); err != nil || n != 3 {
		t.Fatalf("first write = %d, %v", n, err)
	}
	if n, err := q.WriteAsProducer(ctx, "p1", 1, rows(3), zero(3)); err != nil || n != 0 {
		t.Fatalf("repeat = %d, %v; want 0 new rows", n, err)
	}
	if n, err := q.WriteAsProducer(ctx, "p1", 2, rows(4), zero(4)); err != nil || n != 2 {
		t.Fatalf("overlapping write = %d, %v; want 2 new rows", n, err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.WriteAsProducer(ctx, "p2", 1, rows(5), zero(5)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, _ := q.Len(ctx, 0); n != 5+5 {
		t.Fatalf("queue has %d rows, want 10", n)
	}
}

// TestConsumerOffsetOnlyMovesForward: a consumer's committed offset is a
// lag report written after the epoch commit, without the job's lease; a
// zombie job reporting late (an older offset) must not move it back.
func TestConsumerOffsetOnlyMovesForward(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	q, err := Create(ctx, st, "events", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.RegisterConsumer(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, next := range []uint64{7, 3, 9, 5, 9, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.CommitConsumer(ctx, "c", 1, next); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := q.CommitConsumer(ctx, "c", 1, 4); err != nil { // the zombie's late report
		t.Fatal(err)
	}
	offs, err := q.ConsumerOffsets(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if offs[1] != 9 || offs[0] != 0 {
		t.Fatalf("consumer offsets = %v, want [0 9]", offs)
	}
}

// TestResolveUnknownWrite: a write whose commit outcome is unknown is
// resolved by the lengths of the partitions it wrote to — all its rows
// there: written; none: not written; anything else: refused (another
// writer), never guessed.
func TestResolveUnknownWrite(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	q, err := Create(ctx, st, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	rows := []weir.Row{{"i": int64(1)}, {"i": int64(2)}, {"i": int64(3)}}
	parts := []int{0, 2, 2}
	unresolved := &UnresolvedWriteError{Queue: "q", Rows: 3, Before: []uint64{0, 0, 0}, Added: []uint64{1, 0, 2}}
	if written, err := unresolved.Resolve(ctx, st); err != nil || written {
		t.Fatalf("before the write: written %v, %v; want not written", written, err)
	}
	if err := q.Write(ctx, rows, parts); err != nil {
		t.Fatal(err)
	}
	if written, err := unresolved.Resolve(ctx, st); err != nil || !written {
		t.Fatalf("after the write: written %v, %v; want written", written, err)
	}
	if err := q.Write(ctx, rows[:1], []int{2}); err != nil { // another writer
		t.Fatal(err)
	}
	if written, err := unresolved.Resolve(ctx, st); err == nil {
		t.Fatalf("with another writer's row: written %v and no error; want a refusal", written)
	}
}
