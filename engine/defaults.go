package engine

import (
	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/clickhouse"
	"github.com/weir-stream/weir/connector/httpsink"
	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/connector/servicelog"
	"github.com/weir-stream/weir/connector/statictable"
)

// DefaultClasses returns a registry with the built-in computation classes
// (Counter, Tokenize, Passthrough, SwiftPassthrough).
func DefaultClasses() *weir.Registry {
	r := weir.NewRegistry()
	if err := builtin.Register(r); err != nil {
		panic(err) // the built-in names are distinct: a programming error
	}
	return r
}

// DefaultConnectors returns a registry with every connector weir ships.
func DefaultConnectors() *connector.Registry { return DefaultConnectorsWith(kafka.Options{}) }

// DefaultConnectorsWith is DefaultConnectors with the Kafka connectors'
// options (for example a Fatal hook).
func DefaultConnectorsWith(ko kafka.Options) *connector.Registry {
	r := connector.NewRegistry()
	kafkaReg := func(r *connector.Registry) error { return kafka.RegisterWith(r, ko) }
	for _, reg := range []func(*connector.Registry) error{queue.Register, httpsink.Register, kafkaReg, statictable.Register, servicelog.Register, clickhouse.Register} {
		if err := reg(r); err != nil {
			panic(err)
		}
	}
	return r
}
