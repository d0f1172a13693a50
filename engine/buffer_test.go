package engine

import (
	"context"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
)

// TestBuffersBoundedByRows: the engine bounds every partition's buffer to
// transport.RowLimit of the pipeline's largest max_rows_per_batch, however
// small its messages: a buffer nobody fetches from takes that many and no
// more. (Without the bound it would take 16 MiB of them.)
func TestBuffersBoundedByRows(t *testing.T) {
	f := newFixture(t, 1)
	p := example(t, "counter")
	p.Computations["Reader"].MaxRowsPerBatch = 30
	p.Computations["Counter"].MaxRowsPerBatch = 70
	e, err := New(context.Background(), Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	offers := make([]transport.Offer, 1000)
	for i := range offers {
		offers[i] = transport.Offer{Msg: &weir.Message{ID: msgid.Ordered(1, "words", uint64(i)), Stream: "words"}, Size: 1}
	}
	if n, want := e.hub.OfferBatch(transport.SenderToken{}, "Counter/0", offers, nil), transport.RowLimit(70); n != want {
		t.Fatalf("a buffer took %d of 1000 one-byte messages, want %d (RowLimit of the largest batch, 70)", n, want)
	}
}
