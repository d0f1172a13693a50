package queue

import (
	"context"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
)

// TestSourceRecords: a queue source's records hold what the binary codec
// decodes (an int written is read as int64) and are sized by their
// encoding, which max_bytes_per_batch counts: a batch stops before the
// record that would pass it, but always holds one.
func TestSourceRecords(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	q, err := Create(ctx, st, "events", 1)
	if err != nil {
		t.Fatal(err)
	}
	rows := []weir.Row{{"n": int(7), "s": "x"}, {"n": int(8), "s": "yy"}, {"n": int(9), "s": "zzz"}}
	if err := q.Write(ctx, rows, []int{0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	p := openSourcePartition(t, st, "events", "0")
	b, err := p.Read(ctx, 0, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != 3 {
		t.Fatalf("%d records, want 3", len(b.Records))
	}
	for i, rec := range b.Records {
		if v, ok := rec.Row["n"].(int64); !ok || v != int64(7+i) {
			t.Errorf("record %d: n = %#v, want int64(%d)", i, rec.Row["n"], 7+i)
		}
		enc, err := codec.AppendRow(nil, rec.Row)
		if err != nil {
			t.Fatal(err)
		}
		if want := 64 + len(enc); rec.Size != want {
			t.Errorf("record %d: size %d, want %d (64 + its encoding)", i, rec.Size, want)
		}
	}
	two := b.Records[0].Size + b.Records[1].Size
	if b, err = p.Read(ctx, 0, 10, two); err != nil || len(b.Records) != 2 || b.Next != 2 {
		t.Fatalf("read with room for two records: %d records, next %d, %v", len(b.Records), b.Next, err)
	}
	if b, err = p.Read(ctx, 0, 10, 1); err != nil || len(b.Records) != 1 {
		t.Fatalf("read with room for none: %d records, %v; want the first alone", len(b.Records), err)
	}
}
