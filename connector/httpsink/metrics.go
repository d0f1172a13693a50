package httpsink

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names; the package comment describes them.
const (
	metricResponses       = "weir_http_sink_responses_total"
	metricAttemptFailures = "weir_http_sink_attempt_failures_total"
)

// vecs are the package's counters, shared by every sink instance (the sink
// label tells them apart) and registered once per process on
// prometheus.DefaultRegisterer.
type vecs struct {
	responses       *prometheus.CounterVec
	attemptFailures *prometheus.CounterVec
}

var metricVecs = sync.OnceValue(func() vecs {
	return vecs{
		responses: register(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricResponses,
			Help: "HTTP responses received by AsyncHttpSink, by sink and status code.",
		}, []string{"sink", "status_code"})),
		attemptFailures: register(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricAttemptFailures,
			Help: "Failed AsyncHttpSink request attempts, by sink and reason (status, redirect, timeout, transport).",
		}, []string{"sink", "reason"})),
	}
})

// register registers c on the default registerer. If an identical collector
// is already there (another copy of this package, a test that registered it),
// that one is used. If registration fails otherwise, c still counts but is
// not exported: metrics are advisory and must never stop delivery.
func register(c *prometheus.CounterVec) *prometheus.CounterVec {
	err := prometheus.DefaultRegisterer.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing
		}
	}
	return c
}

// sinkMetrics are the counters of one sink id.
type sinkMetrics struct {
	sink string
	v    vecs
	mu   sync.Mutex
	// byCode caches the per-status children (few distinct codes).
	byCode map[int]prometheus.Counter
}

func newSinkMetrics(sink string) *sinkMetrics {
	return &sinkMetrics{sink: sink, v: metricVecs(), byCode: map[int]prometheus.Counter{}}
}

func (m *sinkMetrics) response(code int) {
	m.mu.Lock()
	c, ok := m.byCode[code]
	if !ok {
		c = m.v.responses.WithLabelValues(m.sink, strconv.Itoa(code))
		m.byCode[code] = c
	}
	m.mu.Unlock()
	c.Inc()
}

func (m *sinkMetrics) attemptFailure(reason string) {
	m.v.attemptFailures.WithLabelValues(m.sink, reason).Inc()
}
