package httpsink

// Metrics: responses by status code and failed attempts by reason are
// counted per sink on the default registry, and registering again (another
// instance, another test) neither panics nor splits the counters.

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counterValue reads one counter from the default gatherer: the series of
// metric name with sink=sink and label=value (0 if absent).
func counterValue(t *testing.T, name, sink, label, value string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["sink"] == sink && got[label] == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestMetrics(t *testing.T) {
	rc := &recorder{respond: func(n int, _ *http.Request, w http.ResponseWriter) {
		if n < 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	sink := t.Name() // startSink uses the test name as the sink id
	// Counters are process-wide: compare with their values before (-count).
	b503 := counterValue(t, metricResponses, sink, "status_code", "503")
	b201 := counterValue(t, metricResponses, sink, "status_code", "201")
	bStatus := counterValue(t, metricAttemptFailures, sink, "reason", reasonStatus)
	d := startSink(t, fastRetry(map[string]any{"url": srv.URL, "payload_column": "body"}), Options{}, nil)
	d.send(msg("m01", "x"), msg("m02", "y"))
	d.runUntil(10*time.Second, "2 acks", func() bool { return d.isAcked("m02") })
	if v := counterValue(t, metricResponses, sink, "status_code", "503") - b503; v != 2 {
		t.Errorf("responses{503} = %v, want 2", v)
	}
	if v := counterValue(t, metricResponses, sink, "status_code", "201") - b201; v != 2 {
		t.Errorf("responses{201} = %v, want 2", v)
	}
	if v := counterValue(t, metricAttemptFailures, sink, "reason", reasonStatus) - bStatus; v != 2 {
		t.Errorf("attempt_failures{status} = %v, want 2", v)
	}

	// Registering the same collectors again returns the registered ones.
	v1, v2 := metricVecs(), metricVecs()
	if v1.responses != v2.responses {
		t.Error("metricVecs built the collectors twice")
	}
	again := register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricResponses,
		Help: "HTTP responses received by AsyncHttpSink, by sink and status code.",
	}, []string{"sink", "status_code"}))
	if again != v1.responses {
		t.Error("a second registration did not reuse the registered collector")
	}
}
