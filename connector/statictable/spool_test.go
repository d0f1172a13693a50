package statictable

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// TestSpoolBatchSkipsPayloads: a batch's rows read with and without their
// payloads have the same ids, timestamps and weights (payloads of every
// kind, bodies above and below 128 bytes), and reading without them — as
// Init counts the open table — decodes no payload: one allocation a row,
// its id.
func TestSpoolBatchSkipsPayloads(t *testing.T) {
	var rows []*pending
	for i := 0; i < 200; i++ {
		payload := weir.Row{"key": fmt.Sprintf("user-%05d", i), "n": int64(i), "f": float64(i) / 3, "b": []byte{byte(i)},
			"list": []any{int64(i), "x", nil}, "map": map[string]any{"a": true}, "none": nil}
		if i%3 == 0 {
			payload["long"] = strings.Repeat("y", 200+i)
		}
		rows = append(rows, &pending{msg: &weir.Message{ID: msgid.Ordered(7, "counts", uint64(i)), SystemTimestamp: store.Timestamp(1000 + i), Payload: payload},
			weight: rowWeight(payload)})
	}
	s := &Sink{path: "p"}
	txn := store.NewTxn()
	if err := s.appendSpoolRows(txn, rows); err != nil {
		t.Fatal(err)
	}
	batch := txn.Mutations()[0].Value
	read := func(payloads bool) []spooledRow {
		var out []spooledRow
		var r spooledRow
		for b := batch; len(b) > 0; {
			var err error
			if b, err = nextSpooled(b, payloads, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	full, counted := read(true), read(false)
	if len(full) != len(rows) || len(counted) != len(rows) {
		t.Fatalf("%d and %d rows read, want %d", len(full), len(counted), len(rows))
	}
	for i, p := range rows {
		want := spooledRow{id: p.msg.ID, ts: p.msg.SystemTimestamp, weight: p.weight, payload: p.msg.Payload}
		if !reflect.DeepEqual(full[i], want) {
			t.Fatalf("row %d read as %+v, want %+v", i, full[i], want)
		}
		want.payload = nil
		if !reflect.DeepEqual(counted[i], want) {
			t.Fatalf("row %d counted as %+v, want %+v", i, counted[i], want)
		}
	}
	count := func() {
		var r spooledRow
		for b := batch; len(b) > 0; {
			var err error
			if b, err = nextSpooled(b, false, &r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a := testing.AllocsPerRun(10, count); a > float64(len(rows)) {
		t.Errorf("counting a batch of %d rows allocates %.0f times: payloads are decoded", len(rows), a)
	}
	if _, err := skipRow([]byte{0x7f, 0}); err == nil {
		t.Error("a payload of an unknown format skipped")
	}
}
