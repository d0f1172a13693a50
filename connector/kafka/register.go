package kafka

import (
	"errors"
	"log"

	"github.com/weir-stream/weir/connector"
)

// Register adds KafkaSource, KafkaSink and AtLeastOnceKafkaSink to r with
// default Options (the standard logger, the process environment).
func Register(r *connector.Registry) error { return RegisterWith(r, Options{}) }

// RegisterWith adds the three classes to r with o.
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
		r.RegisterSink(AtLeastOnceSinkClassName, func(sp connector.SinkParams) (connector.Sink, error) {
			s, err := NewAtLeastOnceSink(sp, o)
			if err != nil {
				return nil, err
			}
			return s, nil
		}),
	)
}

func defaultLogf(format string, args ...any) { log.Printf(format, args...) }
