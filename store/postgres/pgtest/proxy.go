package pgtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Cut is where the proxy cuts a connection.
type Cut int

const (
	// NoCut forwards the pipeline.
	NoCut Cut = iota
	// CutBeforeSync drops the pipeline's Sync message and closes both
	// sides: the server never commits the implicit transaction, the client
	// does not know.
	CutBeforeSync
	// CutAfterCommit forwards the Sync, swallows the server's answers up
	// to its ReadyForQuery — proof that the transaction has ended, here
	// committed — and then closes both sides: the commit applied, the
	// client does not know.
	CutAfterCommit
)

func (c Cut) String() string {
	switch c {
	case CutBeforeSync:
		return "cut-before-sync"
	case CutAfterCommit:
		return "cut-after-commit"
	default:
		return "no-cut"
	}
}

// Proxy is a TCP proxy in front of a PostgreSQL server that understands
// just enough of the wire protocol to cut a connection at a chosen point
// of a pipeline (the messages up to a Sync, which is how the driver sends
// a query, and how the store sends a whole commit as one implicit
// transaction). It listens on loopback and is closed when the test ends.
type Proxy struct {
	// URL is the server URL with the proxy's address as host.
	URL string

	ln     net.Listener
	target string

	mu      sync.Mutex
	armed   []Cut       // one-shot cuts, applied in order to the next pipelines that qualify
	random  *rand.Rand  // random cuts (Random), nil if off
	p       float64     // probability of a random cut
	budget  int         // random cuts left
	minExec int         // a pipeline qualifies with at least this many Executes
	cuts    map[Cut]int // cuts made
	conns   map[net.Conn]bool
}

// NewProxy starts a proxy in front of the server of serverURL.
func NewProxy(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, cuts: map[Cut]int{}, conns: map[net.Conn]bool{}, minExec: 1}
	pu := *u
	pu.Host = ln.Addr().String()
	p.URL = pu.String()
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Arm makes the next pipeline with at least minExec Execute messages get
// the given cut (one-shot; several Arm calls queue).
func (p *Proxy) Arm(cut Cut, minExec int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = append(p.armed, cut)
	p.minExec = minExec
}

// Random cuts qualifying pipelines (at least minExec Executes) with
// probability prob each, half before the Sync and half after the commit,
// up to budget cuts, drawing from a generator seeded with seed.
func (p *Proxy) Random(seed uint64, prob float64, budget, minExec int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.random = rand.New(rand.NewPCG(seed, 0x70726f7879))
	p.p, p.budget, p.minExec = prob, budget, minExec
}

// Cuts returns how many cuts of each kind the proxy made.
func (p *Proxy) Cuts(c Cut) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts[c]
}

// Close stops accepting and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// decide returns the cut for a pipeline of execs Execute messages.
func (p *Proxy) decide(execs int) Cut {
	p.mu.Lock()
	defer p.mu.Unlock()
	if execs < p.minExec {
		return NoCut
	}
	cut := NoCut
	switch {
	case len(p.armed) > 0:
		cut, p.armed = p.armed[0], p.armed[1:]
	case p.random != nil && p.budget > 0 && p.random.Float64() < p.p:
		p.budget--
		cut = CutBeforeSync
		if p.random.IntN(2) == 1 {
			cut = CutAfterCommit
		}
	}
	if cut != NoCut {
		p.cuts[cut]++
	}
	return cut
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(client)
	}
}

// session is one proxied connection.
type session struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	// awaitReady is set when the client side forwarded a Sync that must
	// be cut after the server's ReadyForQuery.
	mu         sync.Mutex
	awaitReady bool
}

func (s *session) close() {
	s.once.Do(func() {
		s.client.Close()
		s.server.Close()
		s.p.track(s.client, false)
		s.p.track(s.server, false)
	})
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	s := &session{p: p, client: client, server: server}
	p.track(client, true)
	p.track(server, true)
	go s.fromServer()
	s.fromClient()
}

// fromClient forwards the client's messages, deciding the cut of each
// pipeline at its Sync.
func (s *session) fromClient() {
	defer s.close()
	// The startup phase: untyped messages. An SSL or GSSAPI encryption
	// request is refused here ('N'), as by a server without TLS; the
	// client then sends its startup message.
	for {
		msg, err := readUntyped(s.client)
		if err != nil {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if len(msg) == 8 && (code == 80877103 || code == 80877104) {
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := s.server.Write(msg); err != nil {
			return
		}
		break
	}
	execs := 0
	for {
		msg, err := readTyped(s.client)
		if err != nil {
			return
		}
		switch msg[0] {
		case 'E':
			execs++
		case 'S':
			cut := s.p.decide(execs)
			execs = 0
			switch cut {
			case CutBeforeSync:
				return
			case CutAfterCommit:
				s.mu.Lock()
				s.awaitReady = true
				s.mu.Unlock()
			}
		}
		if _, err := s.server.Write(msg); err != nil {
			return
		}
	}
}

// fromServer forwards the server's messages; after a Sync armed with
// CutAfterCommit it swallows them and cuts at the ReadyForQuery.
func (s *session) fromServer() {
	defer s.close()
	for {
		msg, err := readTyped(s.server)
		if err != nil {
			return
		}
		s.mu.Lock()
		swallow := s.awaitReady
		s.mu.Unlock()
		if swallow {
			if msg[0] == 'Z' {
				return
			}
			continue
		}
		if _, err := s.client.Write(msg); err != nil {
			return
		}
	}
}

// maxMessage bounds a protocol message the proxy buffers.
const maxMessage = 1 << 30

func readUntyped(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 8 || n > maxMessage {
		return nil, fmt.Errorf("pgtest proxy: startup message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

func readTyped(r io.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > maxMessage {
		return nil, errors.New("pgtest proxy: malformed message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}
