package job

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/tables"
)

// TestOutboxSizesOnlyUndelivered: an output delivered before the outbox
// is asked for its bytes (a sync sink's, within its epoch) is never sized,
// and the bytes are those of the outputs still undelivered.
func TestOutboxSizesOnlyUndelivered(t *testing.T) {
	o := newOutbox(nil, "A/0")
	var outs []*output
	for i := range 4 {
		m := &weir.Message{ID: msgid.Ordered(5, "s", uint64(i)), Stream: "s", Payload: weir.Row{"key": "k", "n": int64(i)}}
		outs = append(outs, o.add(m, 1, false))
	}
	o.ack(outs[0])
	o.ack(outs[2])
	n, bytes := o.undelivered()
	want := tables.MessageSize(outs[1].msg) + tables.MessageSize(outs[3].msg)
	if n != 2 || bytes != want {
		t.Fatalf("undelivered() = %d outputs, %d bytes; want 2, %d", n, bytes, want)
	}
	if outs[0].size != 0 || outs[2].size != 0 {
		t.Errorf("outputs delivered before the count were sized: %d and %d bytes", outs[0].size, outs[2].size)
	}
	o.ack(outs[1])
	if n, bytes := o.undelivered(); n != 1 || bytes != tables.MessageSize(outs[3].msg) {
		t.Fatalf("after one more delivery: %d outputs, %d bytes; want 1, %d", n, bytes, tables.MessageSize(outs[3].msg))
	}
	o.ack(outs[3])
	if n, bytes := o.undelivered(); n != 0 || bytes != 0 {
		t.Fatalf("all delivered: %d outputs, %d bytes; want 0, 0", n, bytes)
	}
}

// TestSwiftLineageAnyOrder: the tracker finds each output's parents
// whether the outputs follow their inputs' order (the fast path) or not,
// and releases a source record once every output of it is delivered.
func TestSwiftLineageAnyOrder(t *testing.T) {
	for _, reversed := range []bool{false, true} {
		tr := newSwiftTracker()
		var ins, outs []*weir.Message
		var recs []connector.Record
		for i := range 3 {
			in := &weir.Message{ID: msgid.Ordered(3, "in", uint64(i)), Stream: "in", Payload: weir.Row{"v": int64(i)}}
			ins = append(ins, in)
			recs = append(recs, connector.Record{Offset: connector.Offset(i)})
		}
		tr.addSourceRecords(ins, recs)
		var lineage [][]*weir.Message
		for i := range 3 {
			p := i
			if reversed {
				p = 2 - i
			}
			outs = append(outs, &weir.Message{ID: ins[p].ID + "-s:00", Stream: "s", Payload: ins[p].Payload})
			lineage = append(lineage, []*weir.Message{ins[p]})
		}
		children := tr.track(ins, outs, lineage)
		if tr.count() != 3 {
			t.Fatalf("reversed=%v: %d records held, want 3", reversed, tr.count())
		}
		for i := range children {
			if children[i].p0 == nil || children[i].p0.msg != lineage[i][0] {
				t.Fatalf("reversed=%v: output %d has parent %v, want %s", reversed, i, children[i].p0, lineage[i][0].ID)
			}
			tr.expect(&children[i], 1)
		}
		tr.delivered(&children[1], 0)
		got := tr.takeReady()
		if len(got) != 1 || got[0].msg != lineage[1][0] {
			t.Fatalf("reversed=%v: released %v, want only the parent of output 1", reversed, got)
		}
		if tr.count() != 2 {
			t.Fatalf("reversed=%v: %d records held after one release, want 2", reversed, tr.count())
		}
		// A Swift output that forwards its parent's row inherits its size.
		if got, want := outputSize(outs[0], &children[0]), tables.MessageSize(outs[0]); got != want {
			t.Errorf("reversed=%v: inherited size %d, want MessageSize %d", reversed, got, want)
		}
	}
}

// TestSourceRecordSizes: a Swift source's held records count the sizes
// their source gave (connector.Record.Size) against
// output_store_bytes_limit, and are estimated only when it gave none.
func TestSourceRecordSizes(t *testing.T) {
	tr := newSwiftTracker()
	a := &weir.Message{ID: msgid.Ordered(3, "in", 0), Stream: "in", Payload: weir.Row{"v": int64(0)}}
	b := &weir.Message{ID: msgid.Ordered(3, "in", 1), Stream: "in", Payload: weir.Row{"v": int64(1)}}
	tr.addSourceRecords([]*weir.Message{a, b}, []connector.Record{{Offset: 0, Size: 100}, {Offset: 1}})
	if got, want := tr.heldBytes(), 100+tables.MessageSize(b); got != want {
		t.Fatalf("held %d bytes, want %d (the source's 100 and an estimate for the unsized)", got, want)
	}
}
