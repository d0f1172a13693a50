package statictable

import (
	"errors"
	"log"

	"github.com/weir-stream/weir/connector"
)

// Options are process-level settings of the package's connectors.
type Options struct {
	// Logf logs a line (nil: the standard logger).
	Logf func(format string, args ...any)
}

func (o Options) logf() func(string, ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	return log.Printf
}

// Register adds StaticTableSource and ArrivalOrderTableSink to r with
// default Options.
func Register(r *connector.Registry) error { return RegisterWith(r, Options{}) }

// RegisterWith adds the two classes to r with o.
func RegisterWith(r *connector.Registry, o Options) error {
	return errors.Join(
		r.RegisterSource(SourceClassName, connector.SourceWith(NewSource, o)),
		r.RegisterSink(SinkClassName, connector.SinkWith(NewSink, o)),
	)
}
