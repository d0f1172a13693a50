package httpsink

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/weir-stream/weir/spec"
)

// Defaults of the parameters (Flow's values).
const (
	DefaultIdempotencyHeader  = "Idempotency-Key"
	DefaultMaxIdleConnections = 8
	DefaultMaxRedirectCount   = 0
	DefaultRequestTimeout     = 60 * time.Second
	DefaultAttemptTimeout     = 10 * time.Second
	DefaultRetryInitialDelay  = time.Second
	DefaultRetryMinimumDelay  = 100 * time.Millisecond
	DefaultRetryMultiplier    = 2.0
	DefaultRetryMaximumDelay  = 30 * time.Second
	DefaultRetryJitterRatio   = 0.2
	DefaultMaxAttemptCount    = 5
)

// Params are the sink's parameters, as decoded from the spec. The package
// comment documents each one. Headers may hold credentials: String prints
// header names only, so that logging a Params does not leak them.
type Params struct {
	// URL is the http:// or https:// endpoint (required).
	URL string `yson:"url,required"`
	// Headers are added to every request. Values may hold credentials:
	// they are never logged nor put into errors, and are not sent to
	// another host on a redirect. Content-Length, Transfer-Encoding and
	// Connection are managed by the sink and rejected; Host sets the
	// request's Host.
	Headers map[string]string `yson:"headers"`
	// PayloadColumn is the column whose value is the request body
	// (required): a string or bytes value is sent as is; null (or a missing
	// column) acknowledges the message without a request; any other type
	// is a permanent failure naming the message id and the column.
	PayloadColumn string `yson:"payload_column,required"`
	// IdempotencyHeader is the header carrying hex(message id); the empty
	// string sends none.
	IdempotencyHeader string `yson:"idempotency_header"`
	// KeepAlive reuses connections between requests.
	KeepAlive bool `yson:"keep_alive"`
	// MaxIdleConnections is the number of idle connections kept per sink
	// instance; 0 keeps none (as keep_alive = false).
	MaxIdleConnections int `yson:"max_idle_connections"`
	// MaxRedirectCount is the redirects followed per attempt. Only 307 and
	// 308 are followed; an https→http redirect is always refused; refused
	// redirects are permanent failures.
	MaxRedirectCount int `yson:"max_redirect_count"`
	// RequestTimeout is the total time for one message across all its
	// attempts and backoff pauses.
	RequestTimeout spec.Duration `yson:"request_timeout"`
	// AttemptTimeout is the time for one attempt, from sending the request
	// to reading the whole response body.
	AttemptTimeout spec.Duration `yson:"attempt_timeout"`
	// RetryInitialDelay is the pause after the first failed attempt.
	RetryInitialDelay spec.Duration `yson:"retry_initial_delay"`
	// RetryMinimumDelay: a pause is never shorter than this.
	RetryMinimumDelay spec.Duration `yson:"retry_minimum_delay"`
	// RetryMultiplier: each further pause is this many times the previous
	// one, up to RetryMaximumDelay.
	RetryMultiplier float64 `yson:"retry_multiplier"`
	// RetryMaximumDelay bounds each pause.
	RetryMaximumDelay spec.Duration `yson:"retry_maximum_delay"`
	// RetryJitterRatio: each pause is multiplied by a random factor in
	// [1-ratio, 1+ratio].
	RetryJitterRatio float64 `yson:"retry_jitter_ratio"`
	// MaxAttemptCount is the attempts per message, the first included.
	MaxAttemptCount int `yson:"max_attempt_count"`
}

// SetDefaults fills every optional parameter with its default
// (spec.Defaulter: DecodeParameters calls it before decoding).
func (p *Params) SetDefaults() {
	p.IdempotencyHeader = DefaultIdempotencyHeader
	p.KeepAlive = true
	p.MaxIdleConnections = DefaultMaxIdleConnections
	p.MaxRedirectCount = DefaultMaxRedirectCount
	p.RequestTimeout = spec.Duration(DefaultRequestTimeout)
	p.AttemptTimeout = spec.Duration(DefaultAttemptTimeout)
	p.RetryInitialDelay = spec.Duration(DefaultRetryInitialDelay)
	p.RetryMinimumDelay = spec.Duration(DefaultRetryMinimumDelay)
	p.RetryMultiplier = DefaultRetryMultiplier
	p.RetryMaximumDelay = spec.Duration(DefaultRetryMaximumDelay)
	p.RetryJitterRatio = DefaultRetryJitterRatio
	p.MaxAttemptCount = DefaultMaxAttemptCount
}

// String describes p without header values (they may be secrets) and with
// the URL's password redacted.
func (p Params) String() string {
	names := make([]string, 0, len(p.Headers))
	for k := range p.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("{url=%s headers=%v payload_column=%q idempotency_header=%q keep_alive=%t "+
		"max_idle_connections=%d max_redirect_count=%d request_timeout=%v attempt_timeout=%v "+
		"retry_initial_delay=%v retry_minimum_delay=%v retry_multiplier=%g retry_maximum_delay=%v "+
		"retry_jitter_ratio=%g max_attempt_count=%d}",
		redactURL(p.URL), names, p.PayloadColumn, p.IdempotencyHeader, p.KeepAlive,
		p.MaxIdleConnections, p.MaxRedirectCount, p.RequestTimeout, p.AttemptTimeout,
		p.RetryInitialDelay, p.RetryMinimumDelay, p.RetryMultiplier, p.RetryMaximumDelay,
		p.RetryJitterRatio, p.MaxAttemptCount)
}

// GoString is String, so that %#v does not print header values either.
func (p Params) GoString() string { return "httpsink.Params" + p.String() }

// ParseParams decodes and checks the sink's parameters. path locates them in
// the spec (e.g. "computations.C.sinks.S.parameters") and prefixes every
// error; all problems are reported together, as spec.DecodeParameters does.
//
// No error ever contains a header value: a headers value that is not a map
// is reported by its kind only, and a bad header value by its name.
func ParseParams(path string, raw map[string]any) (Params, error) {
	var p Params
	var errs []error
	// spec.DecodeParameters quotes short strings in type errors; a headers
	// value written as a string ("Authorization: Bearer …") would end up in
	// the error. Check its shape here and hide it from the decoder.
	if h, ok := raw["headers"]; ok {
		if !isMap(h) {
			errs = append(errs, &spec.Error{Path: joinPath(path, "headers"),
				Msg: fmt.Sprintf("expected a map of header names to string values, got %s (value not shown: headers may hold secrets)", kindOf(h))})
			rest := make(map[string]any, len(raw))
			for k, v := range raw {
				if k != "headers" {
					rest[k] = v
				}
			}
			raw = rest
		}
	}
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.check(path)...)
	if err := errors.Join(errs...); err != nil {
		return Params{}, err
	}
	return p, nil
}

// isMap reports whether v is a map (of any key and value type) or null;
// the decoder reports problems inside a map by key, never by value.
func isMap(v any) bool {
	return v == nil || reflect.ValueOf(v).Kind() == reflect.Map
}

// kindOf names the kind of a raw value without showing it.
func kindOf(v any) string {
	switch v.(type) {
	case string, []byte:
		return "a string"
	case bool:
		return "a boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "an integer"
	case float32, float64:
		return "a float"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a value of Go type %T", v)
}

// managedHeaders are set by the sink (or by net/http from the sink's
// settings); configuring them would contradict it.
var managedHeaders = map[string]string{
	"Content-Length":    "it is computed from the payload",
	"Transfer-Encoding": "the payload is sent with a Content-Length",
	"Connection":        "set keep_alive instead",
}

// check validates the decoded values. It runs even when decoding failed, so
// that one run reports everything; errors never contain header values.
func (p *Params) check(path string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &spec.Error{Path: joinPath(path, key), Msg: fmt.Sprintf(format, args...)})
	}
	if p.URL != "" {
		u, err := url.Parse(p.URL)
		switch {
		case err != nil:
			// url.Parse quotes the whole URL, password included; say only
			// that it does not parse.
			bad("url", "not a valid URL; write it as http://host[:port]/path or https://…")
		case u.Scheme != "http" && u.Scheme != "https":
			bad("url", "scheme must be http or https, got %q", u.Scheme)
		case u.Host == "":
			bad("url", "has no host; write it as %s://host[:port]/path", u.Scheme)
		}
	}
	if p.PayloadColumn == "" {
		bad("payload_column", "must name the input column holding the request body")
	}
	idem := ""
	if p.IdempotencyHeader != "" {
		if !validHeaderName(p.IdempotencyHeader) {
			bad("idempotency_header", "%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)", p.IdempotencyHeader)
		} else {
			idem = http.CanonicalHeaderKey(p.IdempotencyHeader)
		}
	}
	for _, name := range sortedKeys(p.Headers) {
		key := joinPath("headers", name)
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			bad(key, "not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)")
		case !validHeaderValue(p.Headers[name]):
			bad(key, "the value contains a control character such as a line break (value not shown: headers may hold secrets)")
		case managedHeaders[canon] != "":
			bad(key, "managed by the sink: %s; remove it", managedHeaders[canon])
		case canon == idem:
			bad(key, "the sink sets %s to the message id; remove it here, or set idempotency_header to \"\" to send your own", idem)
		}
	}
	for _, n := range sortedKeys(p.Headers) {
		for _, m := range sortedKeys(p.Headers) {
			if n < m && http.CanonicalHeaderKey(n) == http.CanonicalHeaderKey(m) {
				bad(joinPath("headers", m), "the same header as %q (names are case-insensitive); keep one", n)
			}
		}
	}
	if p.MaxIdleConnections < 0 {
		bad("max_idle_connections", "must be zero or positive, got %d", p.MaxIdleConnections)
	}
	if p.MaxRedirectCount < 0 {
		bad("max_redirect_count", "must be zero or positive, got %d", p.MaxRedirectCount)
	}
	if p.RequestTimeout <= 0 {
		bad("request_timeout", "must be positive, got %v", p.RequestTimeout)
	}
	if p.AttemptTimeout <= 0 {
		bad("attempt_timeout", "must be positive, got %v", p.AttemptTimeout)
	}
	if p.RetryInitialDelay < 0 {
		bad("retry_initial_delay", "must not be negative, got %v", p.RetryInitialDelay)
	}
	if p.RetryMinimumDelay < 0 {
		bad("retry_minimum_delay", "must not be negative, got %v", p.RetryMinimumDelay)
	}
	if p.RetryMaximumDelay < p.RetryMinimumDelay {
		bad("retry_maximum_delay", "must be at least retry_minimum_delay (%v), got %v", p.RetryMinimumDelay, p.RetryMaximumDelay)
	}
	if !(p.RetryMultiplier >= 1) { // also rejects NaN
		bad("retry_multiplier", "must be at least 1, got %g", p.RetryMultiplier)
	}
	if !(p.RetryJitterRatio >= 0 && p.RetryJitterRatio <= 1) {
		bad("retry_jitter_ratio", "must be between 0 and 1, got %g", p.RetryJitterRatio)
	}
	if p.MaxAttemptCount < 1 {
		bad("max_attempt_count", "must be at least 1 (the first attempt counts), got %d", p.MaxAttemptCount)
	}
	return errs
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than tab (a line break
// would inject headers).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// redactURL returns raw with any password replaced, or a placeholder if it
// does not parse.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable url>"
	}
	return u.Redacted()
}

// joinPath appends key to a spec path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
