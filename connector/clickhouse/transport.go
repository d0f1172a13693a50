package clickhouse

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Setting is one query-level ClickHouse setting of a Request.
type Setting struct{ Name, Value string }

// Request is one statement for ClickHouse, as the sink builds it: the
// query text (ending in "FORMAT <format>" for an INSERT), its settings and,
// for an INSERT, the rows. The same Request is sent over HTTP (the query
// and settings as URL parameters, the rows as the body) and, in the tests,
// through chDB as InlineSQL: one statement builder for both.
type Request struct {
	Query    string
	Settings []Setting
	Body     []byte
	// OnStart, if set, is called once the request is on its way to the
	// server (for HTTP: its headers were written to the connection): from
	// then on the server may apply it. At-most-once delivery never retries
	// a request that started.
	OnStart func()
}

// InlineSQL renders r as one SQL text: settings as a SETTINGS clause
// before FORMAT (an INSERT) or at the end (a SELECT), then a line break and
// the rows. ClickHouse 18.16 does not accept SETTINGS in an INSERT; the
// HTTP transport sends them as URL parameters instead.
func (r Request) InlineSQL() string {
	var b strings.Builder
	q := r.Query
	i := strings.LastIndex(q, " FORMAT ")
	head, tail := q, ""
	if i >= 0 && strings.HasPrefix(q, "INSERT") {
		head, tail = q[:i], q[i:]
	}
	b.WriteString(head)
	if len(r.Settings) > 0 {
		b.WriteString(" SETTINGS ")
		for j, s := range r.Settings {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.Name)
			b.WriteString(" = ")
			b.WriteString(quoteString(s.Value))
		}
	}
	b.WriteString(tail)
	if len(r.Body) > 0 {
		b.WriteByte('\n')
		b.Write(r.Body)
	}
	return b.String()
}

// Transport runs requests against one ClickHouse endpoint. Do returns the
// response body of a success; a failure is a *ServerError (the server
// answered with an exception or a non-2xx status) or a transport error.
type Transport interface {
	Do(ctx context.Context, r Request) ([]byte, error)
	// Endpoint names the target in errors and logs.
	Endpoint() string
	Close()
}

// TransportFactory builds the transport of one endpoint. The sink builds
// one per host and again when write_timeout changes. Options.Transport
// replaces the HTTP transport (the chDB tests run the sink in-process).
type TransportFactory func(endpoint string, cfg TransportConfig) (Transport, error)

// TransportConfig is what a transport needs besides its endpoint.
type TransportConfig struct {
	User, Password string
	// Timeout bounds one request, from sending to the end of the answer
	// (write_timeout).
	Timeout   time.Duration
	TLSConfig *tls.Config
}

// httpTransport speaks ClickHouse's HTTP interface with net/http: POST
// /?query=<query>&<settings> with the rows as the body, basic
// authentication. It works from 18.16 to current servers.
type httpTransport struct {
	base   string
	cfg    TransportConfig
	tr     *http.Transport
	client *http.Client
}

// NewHTTPTransport is the default TransportFactory.
func NewHTTPTransport(endpoint string, cfg TransportConfig) (Transport, error) {
	tr := &http.Transport{
		DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// ClickHouse closes idle keep-alive connections after 3s
		// (keep_alive_timeout); closing ours sooner avoids sending on a
		// connection the server is closing.
		IdleConnTimeout:     2 * time.Second,
		MaxIdleConnsPerHost: maxIdleConnectionsPerTarget,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if cfg.TLSConfig != nil {
		tr.TLSClientConfig = cfg.TLSConfig.Clone()
	}
	return &httpTransport{base: endpoint, cfg: cfg, tr: tr,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

func (t *httpTransport) Endpoint() string { return t.base }

func (t *httpTransport) Close() { t.tr.CloseIdleConnections() }

// Do sends r. The answer counts only once read to the end: an answer cut
// short leaves the outcome unknown (a transient failure).
func (t *httpTransport) Do(ctx context.Context, r Request) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	v := url.Values{}
	v.Set("query", r.Query)
	for _, s := range r.Settings {
		v.Set(s.Name, s.Value)
	}
	if r.OnStart != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: r.OnStart})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/?"+v.Encode(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", t.base, err)
	}
	req.SetBasicAuth(t.cfg.User, t.cfg.Password)
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	resp, err := t.client.Do(req)
	if err != nil {
		// url.Error quotes the URL, which holds the query but no secret.
		return nil, fmt.Errorf("%s: %w", t.base, stripURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer (HTTP %d): %w", t.base, resp.StatusCode, err)
	}
	if resp.StatusCode/100 == 2 {
		// A server may report an exception after a 200 started streaming;
		// the text then ends with it.
		if code := resp.Header.Get("X-ClickHouse-Exception-Code"); code != "" {
			n, _ := strconv.Atoi(code)
			return nil, &ServerError{Code: n, HTTPStatus: resp.StatusCode, Message: trimMessage(string(body)), Host: t.base}
		}
		return body, nil
	}
	code := parseExceptionCode(string(body))
	if h := resp.Header.Get("X-ClickHouse-Exception-Code"); h != "" {
		if n, err := strconv.Atoi(h); err == nil {
			code = n
		}
	}
	return nil, &ServerError{Code: code, HTTPStatus: resp.StatusCode, Message: trimMessage(string(body)), Host: t.base}
}

// stripURL drops the request URL from a *url.Error (it holds the whole
// query) and keeps the cause.
func stripURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// quoteString quotes s as a ClickHouse string literal.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case 0:
			b.WriteString(`\0`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// quoteIdent quotes a name (already checked by validIdent) with backticks.
func quoteIdent(s string) string { return "`" + s + "`" }
