// Package httpsink is the AsyncHttpSink connector (Flow's TAsyncHttpSink):
// every output message of the sink's input stream becomes one HTTP POST
// request whose body is the raw bytes of one payload column.
//
// # Guarantee: at-least-once
//
// The sink is an ordered transactional-outbox sink (connector.OrderedAsyncSink):
// outputs reach it already durable in the computation's outbox, get sequence
// numbers in message id order, and are POSTed only after the epoch that
// produced them has committed. A message leaves the outbox only after the
// receiver answered 2xx and a later epoch recorded that. POST requests run
// outside the epoch transaction, so a request the receiver applied may be sent
// again: after a timeout or a connection reset whose outcome is unknown, and
// after a job restart (which re-sends every message not yet recorded). Nothing
// is lost, but the receiver sees duplicates: it must make the operation
// idempotent or deduplicate by the Idempotency-Key header, whose value is the
// hex of the message's stable id — the same on every retry and every restart.
//
// at_most_once_strategy is rejected when the sink is built, enabled or not
// (see ErrAtMostOnceUnsupported), as Flow fails spec loading for it: the
// sink's only mode is the outbox, and accepting the setting would promise a
// drop-on-overflow behaviour that the sink does not have.
//
// # Ordering and progress
//
// Within one job (partition), requests are sent one at a time in sequence
// number order, and acknowledgements move only as a contiguous prefix of that
// order: message n+1 is sent only after message n got a 2xx (or was skipped
// because its payload is null). When a message cannot be delivered — its
// retries are exhausted or its failure is permanent — the partition's
// delivery stops, visibly: AsyncHttpSink.Failure returns the error, the
// message and everything after it stay in the outbox (Pending counts them),
// and the partition cannot complete. An attempt that gets no answer at all
// (connection refused or reset, a timeout) is reported through Failure at
// once, before the retries run out, as a *connector.ReachError ("cannot
// reach http://host:port: …, retrying (attempt N)"), until an attempt gets
// an answer. The job reports Failure; the engine's controller then stops
// the job, shows the error (stderr, 'weir pipeline status' sink_failures)
// and restarts the partition with backoff. Delivery resumes from that
// message, with the same Idempotency-Key.
//
// # Parameters
//
// Decoded strictly with spec.DecodeParameters: an unknown key is an error
// naming the key. Durations take integer milliseconds or strings such as
// "250ms".
//
// Each parameter, with its default, is documented on Params and in
// docs/spec.md: url and payload_column (required), headers,
// idempotency_header, keep_alive, max_idle_connections,
// max_redirect_count, request_timeout, attempt_timeout, and the backoff:
// retry_initial_delay, retry_multiplier, retry_maximum_delay,
// retry_jitter_ratio, retry_minimum_delay, max_attempt_count.
//
// # Which failures are retried
//
// A 2xx response whose body was read to the end is success. Retried, until
// max_attempt_count or request_timeout runs out: 408 Request Timeout, 425 Too
// Early, 429 Too Many Requests, every 5xx, and transport failures — connection
// refused or reset, a connection closed before the response, attempt and
// body-read timeouts, TLS errors. A request whose outcome is unknown (reset
// after sending, timeout) may have been applied; retrying it with the same
// Idempotency-Key is what the receiver's deduplication is for. Permanent (the
// message's delivery stops at once): every other status (a 3xx that is not
// followed, the other 4xx), refused redirects and a payload of the wrong
// type. Retry-After is not honoured; the backoff above applies.
//
// net/http may itself re-send a request once, without the sink seeing a
// failed attempt, when a reused keep-alive connection breaks before any
// response: a POST carrying an Idempotency-Key (or X-Idempotency-Key) header
// counts as replayable for it. Like every retry, the re-sent request has the
// same key.
//
// # Metrics
//
// Registered once on prometheus.DefaultRegisterer:
//
//   - weir_http_sink_responses_total{sink, status_code}: responses received,
//     including redirects that were refused.
//   - weir_http_sink_attempt_failures_total{sink, reason}: failed attempts by
//     reason: "status" (a non-2xx final response), "redirect" (a refused
//     redirect), "timeout" (attempt or request timeout), "transport" (any
//     other connection or protocol error).
package httpsink
