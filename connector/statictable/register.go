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
		r.RegisterSource(SourceClassName, func(sp connector.SourceParams) (connector.Source, error) {
			s, err := NewSource(sp, o)
			if err != nil {
				return nil, err
			}
			return s, nil
		}),
		r.RegisterSink(SinkClassName, func(sp connector.SinkParams) (connector.Sink, error) {
			s, err := NewSink(sp, o)
			if err != nil {
				return nil, err
			}
			return s, nil
		}),
	)
}
