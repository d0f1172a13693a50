package engine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// TestUnlistableSourceVisible (issue 13 item 2): a Kafka source whose
// broker does not answer shows in Status (source_errors), in the
// weir_source_listing_failures metric and through Warnf, and the finite
// pipeline does not complete.
func TestUnlistableSourceVisible(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := spec.ParseYSON([]byte(`
"computations" = {
    "Reader" = {
        "computation_class_name" = "Passthrough";
        "source_streams" = {"events" = {"source_class_name" = "KafkaSource";
            "parameters" = {"brokers" = ["` + addr + `"]; "topic" = "t"; "finite" = %true}}};
        "output_stream_ids" = ["out"];
    };
};
"streams" = {"out" = {}};
"dynamic_spec" = {"scheduler_period" = "20ms"; "job_restart_backoff" = "20ms"; "job_restart_backoff_max" = "40ms"};
`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 1)
	var mu sync.Mutex
	var warned []string
	warnf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		warned = append(warned, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := New(ctx, Config{Spec: p, Store: f.st, Classes: DefaultClasses(), Connectors: DefaultConnectors(), Logf: f.logf, Warnf: warnf})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := e.Status()
		if s.State == "completed" {
			t.Fatal("a pipeline whose source cannot be listed completed")
		}
		if len(s.SourceErrors) == 1 && s.SourceErrors[0].ConsecutiveFailures >= 3 {
			se := s.SourceErrors[0]
			if se.Computation != "Reader" || se.Listed || !strings.Contains(se.LastError, "connection refused") || se.RetryAt == nil {
				t.Fatalf("source error %+v", se)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no repeated source error in 20s; status %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector())
	if n, err := testutil.GatherAndCount(reg, "weir_source_listing_failures"); err != nil || n != 1 {
		t.Fatalf("weir_source_listing_failures series: %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) == 0 || !strings.Contains(warned[0], "cannot list the partitions of Reader's source") {
		t.Fatalf("warned %q", warned)
	}
}
