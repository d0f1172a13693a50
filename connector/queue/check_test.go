package queue

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/store"
)

// TestCheck: an intact queue checks clean; a missing row, an offset beyond
// the rows and rows of a queue that does not exist are each reported.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	q, err := Create(ctx, st, "events", 2)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]weir.Row, 10)
	parts := make([]int, 10)
	for i := range rows {
		rows[i], parts[i] = weir.Row{"i": int64(i)}, i%2
	}
	if err := q.Write(ctx, rows, parts); err != nil {
		t.Fatal(err)
	}
	check := func() []string {
		var got []string
		rep, err := Check(ctx, st, func(s string) { got = append(got, s) })
		if err != nil || rep.Queues != 1 {
			t.Fatalf("Check: %+v, %v", rep, err)
		}
		return got
	}
	if got := check(); len(got) != 0 {
		t.Fatalf("an intact queue: %v", got)
	}

	txn := store.NewTxn()
	txn.Delete(store.QueueRows, binary.BigEndian.AppendUint64(q.rowPrefix(1), 2))
	txn.Put(store.Consumers, q.consumerKey("c", 0), binary.BigEndian.AppendUint64(nil, 99))
	txn.Put(store.QueueRows, binary.BigEndian.AppendUint64(append([]byte("gone\x00"), 0, 0, 0, 0), 0), make([]byte, 9))
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(check(), "\n")
	for _, want := range []string{
		`queue "events" partition 1: row index 3 where 2 belongs: rows 2..2 are missing`,
		`consumer "c" of queue "events" partition 0: offset 99 is beyond the 5 rows`,
		`queue "gone" partition 0: rows of a queue that does not exist`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant %q", got, want)
		}
	}
}
