package testhosts

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// PostgresPort is the port a host's PostgreSQL server listens on (every
// host has its own ports).
const PostgresPort = 5432

// Postgres is a PostgreSQL server running inside a host: store/postgres/
// pgtest's throwaway cluster (initdb in the network's directory, fsync
// on), listening on the host's address, run as pgtest.OSUser since
// PostgreSQL refuses root. Its methods are not safe for concurrent use
// with each other or with a Kill of its host.
type Postgres struct {
	// Host is the host the server runs in.
	Host *Host

	srv *pgtest.Server
}

// StartPostgres initialises a PostgreSQL cluster and starts it inside the
// host; it returns once the server accepts connections and its database
// weirtest exists. The network stops it at teardown. Without PostgreSQL's
// binaries it fails: call pgtest.Require(t) first to skip (or fail under
// CI=true) with the right message.
func (h *Host) StartPostgres() (*Postgres, error) {
	n := h.net
	srv, err := pgtest.StartWith(pgtest.Options{
		Listen:    h.Addr.String(),
		Port:      PostgresPort,
		Dir:       n.dir,
		TrustFrom: Subnet.String(),
		Launcher:  []string{"ip", "netns", "exec", h.ns},
	})
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL in host %s: %w", h.Name, err)
	}
	return h.adopt(srv)
}

// adopt makes srv the host's server: the network stops it at teardown.
func (h *Host) adopt(srv *pgtest.Server) (*Postgres, error) {
	n := h.net
	pg := &Postgres{Host: h, srv: srv}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		srv.Stop()
		return nil, errors.New("network closed")
	}
	n.pgs = append(n.pgs, pg)
	return pg, nil
}

// URL is a postgres:// URL of the server's database weirtest (superuser
// postgres, no password) at the host's address: reachable from every
// host of the network, as long as the server's host is neither
// partitioned nor unplugged.
func (p *Postgres) URL() string { return p.srv.URL }

// SocketURL reaches the same database through the server's Unix socket:
// from the test process (or any process on this machine), whatever the
// network does — for the test's own reads, such as the oracle's.
func (p *Postgres) SocketURL() string { return p.srv.SocketURL }

// PID is the postmaster's process id.
func (p *Postgres) PID() int { return p.srv.PID() }

// DataDir is the cluster's data directory.
func (p *Postgres) DataDir() string { return p.srv.DataDir() }

// Restart stops the server cleanly (fast shutdown) and starts it again;
// it returns once it accepts connections.
func (p *Postgres) Restart() error { return p.srv.Restart() }

// Crash kills the server's host (Host.Kill: every process of it, the
// postmaster and all backends, then the shared memory they left). The
// server stays down until Relaunch.
func (p *Postgres) Crash() error { return p.Host.Kill() }

// Relaunch starts the server again after a Crash: PostgreSQL recovers from
// its write-ahead log; committed transactions are there, others are not.
// It returns once the server accepts connections.
func (p *Postgres) Relaunch() error { return p.srv.Relaunch() }

// Log returns the end of the server's log, for failure messages.
func (p *Postgres) Log() string { return p.srv.Log() }

// StartPostgresStandby makes the host a streaming standby of primary
// (pgtest.StartStandby on the host's address, port 5432); Promote makes
// it the primary after the primary's loss. The network stops it at
// teardown.
func (h *Host) StartPostgresStandby(primary *Postgres) (*Postgres, error) {
	n := h.net
	srv, err := pgtest.StartStandby(primary.srv, pgtest.Options{
		Listen:   h.Addr.String(),
		Port:     PostgresPort,
		Dir:      n.dir,
		Launcher: []string{"ip", "netns", "exec", h.ns},
	})
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL standby in host %s: %w", h.Name, err)
	}
	return h.adopt(srv)
}

// SetSynchronous makes the server's commits wait for its standby.
func (p *Postgres) SetSynchronous() error { return p.srv.SetSynchronous() }

// Promote makes a standby the primary.
func (p *Postgres) Promote() error { return p.srv.Promote() }
