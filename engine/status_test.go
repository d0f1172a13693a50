package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/spec"
)

// TestSinkFailureVisible: a sink whose retries run out (an HTTP receiver
// answering 400, here forever) says so in Status and in the
// weir_sink_delivery_stopped metric, and the pipeline does not complete
// without the message (its job is restarted with backoff and tries again).
func TestSinkFailureVisible(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad", http.StatusBadRequest)
	}))
	defer srv.Close()
	f := newFixture(t, 1)
	if err := f.events.Write(context.Background(), []weir.Row{{"key": "a", "body": "hello"}}, []int{0}); err != nil {
		t.Fatal(err)
	}
	p := httpSinkSpec(t, srv.URL, `"scheduler_period" = "20ms"`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := New(ctx, Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	go e.Run(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s := e.Status(); len(s.SinkFailures) > 0 {
			if s.SinkFailures[0].Sink != "http" || !strings.Contains(s.SinkFailures[0].Error, "400") {
				t.Fatalf("sink failure %+v", s.SinkFailures[0])
			}
			if s.State == "completed" {
				t.Fatal("the pipeline completed although its only message was never delivered")
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(e.Collector())
			if n, err := testutil.GatherAndCount(reg, "weir_sink_delivery_stopped"); err != nil || n != 1 {
				t.Fatalf("weir_sink_delivery_stopped series: %d, %v", n, err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no sink failure reported; status %+v", e.Status())
}

// httpSinkSpec is a Passthrough reading the finite queue "events" into an
// AsyncHttpSink posting each row's "body" to url, with dynamic as the
// dynamic_spec's entries.
func httpSinkSpec(t *testing.T, url, dynamic string) *spec.Pipeline {
	t.Helper()
	p, err := spec.ParseYSON([]byte(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "Passthrough";
        "source_streams" = {"events" = {"source_class_name" = "QueueSource";
            "parameters" = {"queue_path" = "events"; "consumer_path" = "c"; "finite" = %true}}};
        "output_stream_ids" = ["out"];
        "sinks" = {"http" = {"sink_class_name" = "AsyncHttpSink"; "input_stream_ids" = ["out"];
            "parameters" = {"url" = "` + url + `"; "payload_column" = "body"}}};
    };
};
"streams" = {"out" = {}};
"dynamic_spec" = {` + dynamic + `};
`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
