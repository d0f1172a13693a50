package remote

// This file holds faultProxy, a TCP proxy the tests put between two nodes
// to break the network the ways a partition does: silently, with no FIN or
// RST reaching the side that is not told.

import (
	"net"
	"sync"
	"testing"
)

// faultProxy forwards connections on loopback to one address. Its faults
// apply to the connections open when they are called; connections made
// later (a client reconnecting) are forwarded normally.
type faultProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*proxied
}

// proxied is one forwarded connection. A direction that stops forwarding
// reads and drops what arrives (a black hole: the writer never blocks and
// never hears of it) and, when its reader ends, closes nothing.
type proxied struct {
	client, server net.Conn

	mu                 sync.Mutex
	toServer, toClient bool
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxied{client: client, server: server, toServer: true, toClient: true}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go c.pipe(client, server, &c.toServer)
		go c.pipe(server, client, &c.toClient)
	}
}

// pipe copies src to dst while *forward holds; afterwards it drops.
func (c *proxied) pipe(src, dst net.Conn, forward *bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		c.mu.Lock()
		fw := *forward
		c.mu.Unlock()
		if err != nil {
			if fw {
				c.client.Close()
				c.server.Close()
			}
			return
		}
		if fw {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// each applies f to every open connection, under its lock.
func (p *faultProxy) each(f func(c *proxied)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		f(c)
		c.mu.Unlock()
	}
}

// silence makes the open connections silent both ways: neither end hears
// anything more, not even that the other is gone.
func (p *faultProxy) silence() {
	p.each(func(c *proxied) { c.toServer, c.toClient = false, false })
}

// cutClient makes the open connections silent and closes their client
// ends: the client learns that its connection is gone (as its keepalive
// would tell it, after seconds) and reconnects; the server hears nothing.
func (p *faultProxy) cutClient() {
	p.each(func(c *proxied) {
		c.toServer, c.toClient = false, false
		c.client.Close()
	})
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.each(func(c *proxied) {
		c.client.Close()
		c.server.Close()
	})
}
