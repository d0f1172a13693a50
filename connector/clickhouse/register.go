package clickhouse

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"github.com/weir-stream/weir/connector"
)

// Sink class names (Flow's names without the T).
const (
	BatchingSinkClassName        = "ClickHouseBatchingSink"
	ShardedBatchingSinkClassName = "ShardedClickHouseBatchingSink"
	AtLeastOnceSinkClassName     = "AtLeastOnceClickHouseSink"
	AtMostOnceSinkClassName      = "AtMostOnceClickHouseSink"
)

// Options are code-level settings, not part of the spec.
type Options struct {
	// Logger receives the structured warnings (deduplication window,
	// degraded guarantee, token support). nil: slog.Default().
	Logger *slog.Logger
	// Transport builds a target's transport. nil: NewHTTPTransport.
	Transport TransportFactory
	// TLSConfig is cloned into the HTTP transports of https hosts.
	TLSConfig *tls.Config
	// Getenv resolves password_env. nil: the process environment.
	Getenv func(string) (string, bool)
	// Sleep waits between retries. nil: a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

func (o Options) transport() TransportFactory {
	if o.Transport != nil {
		return o.Transport
	}
	return NewHTTPTransport
}

func (o Options) getenv() func(string) (string, bool) {
	if o.Getenv != nil {
		return o.Getenv
	}
	return osLookupEnv
}

func (o Options) sleep() func(context.Context, time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep
	}
	return sleepCtx
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Register adds the four ClickHouse sink classes to r with default Options.
func Register(r *connector.Registry) error { return RegisterWith(r, Options{}) }

// RegisterWith adds the four classes to r with o.
func RegisterWith(r *connector.Registry, o Options) error {
	return errors.Join(
		r.RegisterSink(BatchingSinkClassName, connector.SinkWith(NewBatchingSink, o)),
		r.RegisterSink(ShardedBatchingSinkClassName, connector.SinkWith(NewShardedBatchingSink, o)),
		r.RegisterSink(AtLeastOnceSinkClassName, connector.SinkWith(NewAtLeastOnceSink, o)),
		r.RegisterSink(AtMostOnceSinkClassName, connector.SinkWith(NewAtMostOnceSink, o)),
	)
}
