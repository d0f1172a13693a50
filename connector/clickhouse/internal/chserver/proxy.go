package chserver

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Fault is what a Proxy does to one request.
type Fault int

const (
	// Pass forwards the request and its answer.
	Pass Fault = iota
	// DropResponse forwards the request, lets the server apply it, then
	// cuts the client's connection instead of answering: the client sees
	// EOF after an INSERT that succeeded (an ambiguous outcome).
	DropResponse
	// RefuseBefore cuts the client's connection before forwarding: the
	// server never sees the request.
	RefuseBefore
	// Unavailable answers 503 without forwarding (a transient failure).
	Unavailable
	// Teapot answers 418 without forwarding: a status the sink does not
	// classify.
	Teapot
)

// Proxy is a faulty HTTP proxy in front of a ClickHouse server, on
// loopback. Decide picks the fault of each INSERT request (queries of
// system tables always pass), in arrival order.
type Proxy struct {
	URL    string // "http://127.0.0.1:<port>"
	srv    *httptest.Server
	target string

	mu      sync.Mutex
	decide  func(n int, query string) Fault
	inserts int
	counts  map[Fault]int
}

// NewProxy starts a proxy to target (an HTTP endpoint) that passes
// everything until SetDecide; the test's cleanup closes it.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{target: target, counts: map[Fault]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// Host returns the proxy's endpoint as "127.0.0.1:<port>".
func (p *Proxy) Host() string { return strings.TrimPrefix(p.URL, "http://") }

// SetDecide sets the fault function: n counts INSERT requests from 1.
func (p *Proxy) SetDecide(f func(n int, query string) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decide = f
}

// Inserts returns how many INSERT requests arrived.
func (p *Proxy) Inserts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inserts
}

// Count returns how many INSERTs met fault f.
func (p *Proxy) Count(f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[f]
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		hangUp(w)
		return
	}
	q := r.URL.Query().Get("query")
	f := Pass
	if strings.HasPrefix(q, "INSERT") {
		p.mu.Lock()
		p.inserts++
		if p.decide != nil {
			f = p.decide(p.inserts, q)
		}
		p.counts[f]++
		p.mu.Unlock()
	}
	switch f {
	case RefuseBefore:
		hangUp(w)
		return
	case Unavailable:
		http.Error(w, "proxy: unavailable", http.StatusServiceUnavailable)
		return
	case Teapot:
		http.Error(w, "proxy: teapot", http.StatusTeapot)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		hangUp(w)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || f == DropResponse {
		hangUp(w)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, as a crashed server's
			}
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
