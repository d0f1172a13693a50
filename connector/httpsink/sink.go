package httpsink

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/weir-stream/weir/connector"
)

// ClassName is the sink_class_name of the HTTP sink (Flow's name).
const ClassName = "AsyncHttpSink"

// Options are code-level settings of the sink, not part of the spec.
type Options struct {
	// TLSConfig, if not nil, is cloned into the client's transport: custom
	// root CAs, client certificates. nil uses the system roots. Tests give
	// the httptest.NewTLSServer's certificate pool here
	// (srv.Client().Transport.(*http.Transport).TLSClientConfig).
	TLSConfig *tls.Config
}

// Register adds the AsyncHttpSink class to r with default Options.
func Register(r *connector.Registry) error {
	return r.RegisterSink(ClassName, Factory(Options{}))
}

// Factory returns a connector.SinkFactory building AsyncHttpSink instances
// with o.
func Factory(o Options) connector.SinkFactory {
	return func(sp connector.SinkParams) (connector.Sink, error) {
		s, err := New(sp, o)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// AsyncHttpSink POSTs each message's payload column to a URL, at least once
// (see the package comment for the guarantee, parameters and retries). It is
// a connector.OrderedAsyncSink whose writer sends one request per message in
// sequence number order; Distribute, Sync, Commit, PendingSync, Failure and
// Pending come from there.
//
// One instance serves one job (partition) and has its own connection pool.
type AsyncHttpSink struct {
	*connector.OrderedAsyncSink
	params Params
	w      *writer
}

// maxBatch bounds the messages handed to one Write. The base records a
// batch's accepted prefix only when Write returns, so a smaller batch lets
// the next epoch record (and acknowledge) delivered messages sooner, and a
// job restart re-sends fewer of them.
const maxBatch = 16

// New builds a sink from its spec parameters. sp.Path is the sink's location
// in the spec (e.g. "computations.C.sinks.S"): every error starts with it.
// A configured at_most_once_strategy (sp.AtMostOnce non-nil, enabled or not)
// is rejected with ErrAtMostOnceUnsupported.
func New(sp connector.SinkParams, o Options) (*AsyncHttpSink, error) {
	if sp.AtMostOnce != nil {
		return nil, fmt.Errorf("%s: %w", joinPath(sp.Path, "at_most_once_strategy"), ErrAtMostOnceUnsupported)
	}
	p, err := ParseParams(joinPath(sp.Path, "parameters"), sp.Parameters)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(p, sp.SinkID, o.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.Path, err)
	}
	base := connector.NewOrderedAsyncSink(w)
	// The writer retries each message itself: the base counts attempts per
	// batch, not per message, and cannot tell a permanent failure from a
	// transient one nor apply request_timeout. An error the writer returns
	// is therefore final for this job, and one attempt makes the base stop
	// the partition's delivery and report it through Failure.
	base.Retry = connector.RetryPolicy{MaxAttempts: 1}
	base.MaxBatch = maxBatch
	return &AsyncHttpSink{OrderedAsyncSink: base, params: p, w: w}, nil
}

// Init starts the instance; the writer logs retries through sc.Logf.
func (s *AsyncHttpSink) Init(ctx context.Context, sc connector.SinkContext) error {
	if sc.Logf != nil {
		s.w.logf = sc.Logf
	}
	s.w.outage.Store(connector.NewOutage(sc))
	return s.OrderedAsyncSink.Init(ctx, sc)
}

// Failure returns the error that stopped the partition's delivery
// (retries exhausted, a permanent failure) or else the last attempt that
// could not reach the receiver since one that did (connector.Outage: a
// *connector.ReachError). The job reports either, and the controller
// stops it and restarts the partition with backoff; the messages stay in
// the outbox.
func (s *AsyncHttpSink) Failure() error {
	if err := s.OrderedAsyncSink.Failure(); err != nil {
		return err
	}
	return s.w.outage.Load().Err()
}

// Close stops delivery (an in-flight request is abandoned; its message stays
// in the outbox) and closes idle connections.
func (s *AsyncHttpSink) Close() error {
	err := s.OrderedAsyncSink.Close()
	s.w.transport.CloseIdleConnections()
	return err
}

// Params returns the decoded parameters.
func (s *AsyncHttpSink) Params() Params { return s.params }

// Status is a snapshot of one instance, for status pages and tests.
type Status struct {
	// Pending counts messages not yet acknowledged (waiting to be sent,
	// sent but not recorded, recorded but not yet acknowledged).
	Pending int
	// Failure is the error that stopped delivery, nil while it runs (a
	// receiver that cannot be reached is Status's Unreached).
	Failure error
	// Unreached is the last attempt that could not reach the receiver
	// since one that did (a *connector.ReachError), nil if none.
	Unreached error
	// Attempts counts requests sent; Retries the attempts after a
	// message's first; AttemptFailures the attempts that failed.
	Attempts, Retries, AttemptFailures int64
	// Delivered counts messages answered 2xx; Skipped those with a null
	// payload, acknowledged without a request.
	Delivered, Skipped int64
}

// Status returns the instance's counters and state.
func (s *AsyncHttpSink) Status() Status {
	return Status{
		Pending:         s.Pending(),
		Failure:         s.OrderedAsyncSink.Failure(),
		Unreached:       s.w.outage.Load().Err(),
		Attempts:        s.w.stats.attempts.Load(),
		Retries:         s.w.stats.retries.Load(),
		AttemptFailures: s.w.stats.failures.Load(),
		Delivered:       s.w.stats.delivered.Load(),
		Skipped:         s.w.stats.skipped.Load(),
	}
}
