package remote

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// testFrame is a full push frame of counter-like messages.
func testFrame() *pushFrame {
	f := &pushFrame{From: "Reader/3", To: "Counter/1", FromLease: 1 << 40, ToLease: 1<<40 + 7}
	for i := range frameRows {
		m := &weir.Message{ID: msgid.ID(fmt.Sprintf("0000018c2f3a4b5c-words:%04d", i)), Stream: "words",
			Payload: weir.Row{"key": fmt.Sprintf("user-%05d", i*37), "page": "/catalog/item/12345", "ms": int64(1_700_000_000_000 + i), "ref": "campaign-x"}}
		var origin transport.PartitionID
		if i%4 == 1 {
			origin = transport.PartitionID(fmt.Sprintf("Source@p%d", i%7))
		}
		f.Msgs = append(f.Msgs, pushed{Msg: m, Size: tables.MessageSize(m), MaybeDup: i%3 == 0, Ordered: i%2 == 0, Origin: origin})
	}
	return f
}

// TestPushFrameRoundTrip: a push frame decodes to what was encoded.
func TestPushFrameRoundTrip(t *testing.T) {
	f := testFrame()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g pushFrame
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if g.From != f.From || g.To != f.To || g.FromLease != f.FromLease || g.ToLease != f.ToLease || len(g.Msgs) != len(f.Msgs) {
		t.Fatalf("decoded header %+v, %d messages", g, len(g.Msgs))
	}
	for i, m := range g.Msgs {
		w := f.Msgs[i]
		if m.Msg.ID != w.Msg.ID || m.Size != w.Size || m.MaybeDup != w.MaybeDup || m.Ordered != w.Ordered || m.Origin != w.Origin || fmt.Sprint(m.Msg.Payload) != fmt.Sprint(w.Msg.Payload) {
			t.Fatalf("message %d: %+v, want %+v", i, m, w)
		}
	}
}

// TestPushFrameAllocations: a frame of 256 messages is encoded into one
// buffer allocated once at its size (growing it by appends copied it about
// ten times: 2540 → 2100 bytes allocated per message in BenchmarkRemotePush).
func TestPushFrameAllocations(t *testing.T) {
	f := testFrame()
	allocs := testing.AllocsPerRun(20, func() { f.MarshalBinary() })
	if allocs > 2 {
		t.Fatalf("%.0f allocations to encode a frame of %d messages, want at most 2", allocs, len(f.Msgs))
	}
}

// TestPushFrameVersion1: a frame of a build before origins (version 1, no
// flagOrigin) still decodes; a frame of an unknown version is refused with
// an error naming the versions.
func TestPushFrameVersion1(t *testing.T) {
	f := testFrame()
	for i := range f.Msgs {
		f.Msgs[i].Origin = ""
	}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b[0] = 1
	var g pushFrame
	if err := g.UnmarshalBinary(b); err != nil || len(g.Msgs) != len(f.Msgs) || g.Msgs[0].Ordered != f.Msgs[0].Ordered {
		t.Fatalf("version 1 frame: %v, %d messages", err, len(g.Msgs))
	}
	b[0] = 9
	if err := g.UnmarshalBinary(b); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("version 9 frame: %v, want an error naming the version", err)
	}
}
