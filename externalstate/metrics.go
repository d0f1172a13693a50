package externalstate

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The package's Prometheus metrics, registered once per process on
// prometheus.DefaultRegisterer (weir run serves them at /metrics). The
// write counters count rows added to epoch transactions (an epoch whose
// commit fails is counted too and redone):
//
//	weir_external_state_writes_total{table,kind}       rows written: put, delete
//	weir_external_state_conflicts_total{computation}   epoch commits refused because a row the epoch read and wrote had changed
type metricVecs struct {
	writes, conflicts *prometheus.CounterVec
}

var metrics = sync.OnceValue(func() metricVecs {
	return metricVecs{
		writes:    Counter("weir_external_state_writes_total", "Rows written to external state tables in epoch transactions (kind put or delete).", "table", "kind"),
		conflicts: Counter("weir_external_state_conflicts_total", "Epoch commits refused because a row the epoch had read and then wrote was changed by another commit.", "computation"),
	}
})

// Counter returns a counter vector registered on the default registerer
// (or the identical one already registered there). If registration fails
// otherwise, the vector still counts but is not exported.
func Counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	err := prometheus.DefaultRegisterer.Register(c)
	var are prometheus.AlreadyRegisteredError
	if err != nil && errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing
		}
	}
	return c
}

// CountWrite counts one row written to table (deleted: a deletion).
func CountWrite(table string, deleted bool) {
	kind := "put"
	if deleted {
		kind = "delete"
	}
	metrics().writes.WithLabelValues(table, kind).Inc()
}

// CountConflict counts one epoch commit of computation refused by an
// external state conflict check.
func CountConflict(computation string) {
	conflicts.Add(1)
	metrics().conflicts.WithLabelValues(computation).Inc()
}

// conflicts counts CountConflict calls in this process.
var conflicts atomic.Int64

// ConflictsTotal returns the conflicts counted in this process, over all
// computations (for tests).
func ConflictsTotal() int64 { return conflicts.Load() }
