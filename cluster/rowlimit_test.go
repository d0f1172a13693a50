package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/examples"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// TestWorkerBoundsBuffersByPlan: a worker that loads the stored spec bounds
// its node's buffers by rows, transport.RowLimit of the spec's largest
// max_rows_per_batch, as the embedded engine does.
func TestWorkerBoundsBuffersByPlan(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	text, err := examples.Spec("counter")
	if err != nil {
		t.Fatal(err)
	}
	text = bytes.Replace(text, []byte(`"computation_class_name" = "Counter";`), []byte(`"computation_class_name" = "Counter"; "max_rows_per_batch" = 70;`), 1)
	text = bytes.Replace(text, []byte(`"computation_class_name" = "SwiftPassthrough";`), []byte(`"computation_class_name" = "SwiftPassthrough"; "max_rows_per_batch" = 30;`), 1)
	if !bytes.Contains(text, []byte(`"max_rows_per_batch" = 70`)) || !bytes.Contains(text, []byte(`"max_rows_per_batch" = 30`)) {
		t.Fatal("the spec was not changed")
	}
	for _, q := range []string{"events", "counts"} {
		if _, err := queue.Create(ctx, st, q, 2); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := json.Marshal(storedSpec{Name: "counter.yson", Text: text})
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte(specKey), v)
	if err := st.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	w := testWorker(t, st, WorkerConfig{})
	if _, _, err := w.planFor(ctx, SpecHash(text)); err != nil {
		t.Fatal(err)
	}
	offers := make([]transport.Offer, 5000)
	for i := range offers {
		offers[i] = transport.Offer{Msg: &weir.Message{ID: msgid.Ordered(1, "words", uint64(i)), Stream: "words"}, Size: 1}
	}
	want := transport.RowLimit(70) // the Counter's batch, the largest
	defer w.Node().Close()
	ep := w.Node().Endpoint("Reader/0", 1)
	if got := ep.OfferBatch(ep.RegisterSender("Reader/0", true), "Counter/0", offers, nil); got != want {
		t.Fatalf("the worker's outgoing channel took %d of 5000 one-byte messages, want %d", got, want)
	}
}
