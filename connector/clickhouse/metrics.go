package clickhouse

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names; the package comment describes them.
const (
	metricInserts  = "weir_clickhouse_sink_inserts_total"
	metricRows     = "weir_clickhouse_sink_rows_total"
	metricBatches  = "weir_clickhouse_sink_batches_total"
	metricFailures = "weir_clickhouse_sink_insert_failures_total"
	metricRetries  = "weir_clickhouse_sink_retries_total"
	metricDropped  = "weir_clickhouse_sink_dropped_total"
)

// vecs are the package's counters, shared by every instance (the sink
// label tells them apart) and registered once on
// prometheus.DefaultRegisterer.
type vecs struct {
	inserts, rows, batches, failures, retries, dropped *prometheus.CounterVec
}

var metricVecs = sync.OnceValue(func() vecs {
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"sink"}, labels...)))
	}
	return vecs{
		inserts:  c(metricInserts, "INSERT requests ClickHouse accepted, by sink."),
		rows:     c(metricRows, "Rows in INSERT requests ClickHouse accepted (a deduplicated replay counts again), by sink."),
		batches:  c(metricBatches, "Exactly-once batches written to every shard, by sink."),
		failures: c(metricFailures, "Failed INSERT attempts, by sink, error class and code (ClickHouse code, http_<status> or transport).", "class", "code"),
		retries:  c(metricRetries, "INSERT attempts retried, by sink and error class.", "class"),
		dropped:  c(metricDropped, "Messages an at-most-once sink dropped, by sink and reason (queue_full, insert_failed, uncertain_after_restart, abandoned_at_close).", "reason"),
	}
})

// register registers c on the default registerer, or returns the identical
// collector already there. If registration fails otherwise, c still counts
// but is not exported: metrics never stop delivery.
func register(c *prometheus.CounterVec) *prometheus.CounterVec {
	err := prometheus.DefaultRegisterer.Register(c)
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
}

func newSinkMetrics(sink string) *sinkMetrics { return &sinkMetrics{sink: sink, v: metricVecs()} }

func (m *sinkMetrics) inserted(rows int) {
	m.v.inserts.WithLabelValues(m.sink).Inc()
	m.v.rows.WithLabelValues(m.sink).Add(float64(rows))
}

func (m *sinkMetrics) batch() { m.v.batches.WithLabelValues(m.sink).Inc() }

func (m *sinkMetrics) failed(c errorClass, code string) {
	m.v.failures.WithLabelValues(m.sink, c.String(), code).Inc()
}

func (m *sinkMetrics) retried(c errorClass) { m.v.retries.WithLabelValues(m.sink, c.String()).Inc() }

func (m *sinkMetrics) dropped(reason string, n int) {
	m.v.dropped.WithLabelValues(m.sink, reason).Add(float64(n))
}
