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
		r.RegisterSource(SourceClassName, connector.SourceWith(NewSource, o)),
		r.RegisterSink(SinkClassName, connector.SinkWith(NewSink, o)),
		r.RegisterSink(AtLeastOnceSinkClassName, connector.SinkWith(NewAtLeastOnceSink, o)),
	)
}

func defaultLogf(format string, args ...any) { log.Printf(format, args...) }
