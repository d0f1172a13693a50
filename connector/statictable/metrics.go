package statictable

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The package's Prometheus metrics, registered once per process on
// prometheus.DefaultRegisterer (weir run serves them at /metrics):
//
//	weir_static_table_source_rows_total{source}            rows read
//	weir_static_table_source_tables_total{source,event}    tables cataloged / opened
//	weir_static_table_source_errors_total{source,reason}   changed, unreadable, malformed, missing, name
//	weir_static_table_sink_rows_total{sink}                rows written into published tables
//	weir_static_table_sink_replayed_rows_total{sink}       replayed rows the frontier covered (not written again)
//	weir_static_table_sink_tables_total{sink,kind}         tables published: data, empty
//	weir_static_table_sink_bytes_total{sink}               bytes of published tables
//	weir_static_table_sink_expired_tables_total{sink}      tables removed at their expiry
//	weir_static_table_sink_conflicts_total{sink}           publishes that found the frontier moved by another writer
//	weir_static_table_sink_publish_seconds{sink}           time to write and publish one table (histogram)
type metricVecs struct {
	srcRows, srcTables, srcErrors                             *prometheus.CounterVec
	sinkRows, sinkReplayed, sinkTables, sinkBytes, sinkExpire *prometheus.CounterVec
	sinkConflicts                                             *prometheus.CounterVec
	sinkPublish                                               *prometheus.HistogramVec
}

var metrics = sync.OnceValue(func() metricVecs {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
	}
	return metricVecs{
		srcRows:       counter("weir_static_table_source_rows_total", "Rows read by StaticTableSource.", "source"),
		srcTables:     counter("weir_static_table_source_tables_total", "Tables cataloged and opened by StaticTableSource.", "source", "event"),
		srcErrors:     counter("weir_static_table_source_errors_total", "StaticTableSource errors by reason (changed, unreadable, malformed, missing, name, schema).", "source", "reason"),
		sinkRows:      counter("weir_static_table_sink_rows_total", "Rows written by ArrivalOrderTableSink into published tables.", "sink"),
		sinkReplayed:  counter("weir_static_table_sink_replayed_rows_total", "Replayed rows ArrivalOrderTableSink found covered by its frontier and did not write again.", "sink"),
		sinkTables:    counter("weir_static_table_sink_tables_total", "Tables published by ArrivalOrderTableSink (kind data or empty).", "sink", "kind"),
		sinkBytes:     counter("weir_static_table_sink_bytes_total", "Bytes of tables published by ArrivalOrderTableSink.", "sink"),
		sinkExpire:    counter("weir_static_table_sink_expired_tables_total", "Tables ArrivalOrderTableSink removed at their expiry.", "sink"),
		sinkConflicts: counter("weir_static_table_sink_conflicts_total", "Publishes that found the partition's frontier moved by another writer (a replaced job's zombie).", "sink"),
		sinkPublish: register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_static_table_sink_publish_seconds", Help: "Time to write, sync and publish one table with its manifest.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"sink"})),
	}
})

// register registers c on the default registerer, or returns the
// identical collector already there. If registration fails otherwise, c
// still counts but is not exported: metrics never stop reading or
// delivery.
func register[C prometheus.Collector](c C) C {
	err := prometheus.DefaultRegisterer.Register(c)
	var are prometheus.AlreadyRegisteredError
	if err != nil && errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	return c
}
