package servicelog

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-stream/weir/externalstate"
)

type metricVecs struct {
	rows, cycles *prometheus.CounterVec
}

// metrics are the package's Prometheus metrics (see the package
// documentation), registered once per process on the default registerer.
var metrics = sync.OnceValue(func() metricVecs {
	return metricVecs{
		rows:   externalstate.Counter("weir_service_log_rows_total", "Rows a ServiceLogSource partition emitted (cycle-end markers not counted); a partition far above the others means a skewed first key column.", "source", "partition"),
		cycles: externalstate.Counter("weir_service_log_cycles_total", "Cycles a ServiceLogSource partition completed.", "source", "partition"),
	}
})
