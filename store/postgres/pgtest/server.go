package pgtest

import (
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// Server is a running throwaway PostgreSQL cluster. Its methods are not
// safe for concurrent use.
type Server struct {
	// URL connects to the cluster's test database as its superuser, over
	// TCP at the address and port the server listens on.
	URL string
	// SocketURL connects to the same database through the server's Unix
	// socket in its directory: a file, so it is reachable from every
	// network namespace of this machine — whatever a test does to the
	// network, the test process still reads the database through it.
	SocketURL string
	// Port is the TCP port the server listens on.
	Port int

	opts  Options
	bin   string
	runAs string // the OS user the server runs as; "" is this process's
	dir   string
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited
}

// Options say where a server listens and how it is launched. The zero
// Options are Start's: loopback, a free port, a new directory in the
// default temporary directory, the server run directly.
type Options struct {
	// Listen is the address the server listens on; "" is 127.0.0.1.
	// Servers started by tests listen on loopback or on the private
	// addresses of internal/testhosts' network namespaces, never beyond.
	Listen string
	// Port is the TCP port; 0 picks a free loopback port.
	Port int
	// Dir is where the server's own directory is made; "" is the default
	// temporary directory. The server's OS user must be able to traverse it.
	Dir string
	// TrustFrom, when not "", is a network (CIDR) whose clients may
	// connect without a password like loopback's (a pg_hba.conf "host"
	// line with trust): the private subnet of internal/testhosts' hosts.
	TrustFrom string
	// Launcher prefixes the server's command line (testproc.CommandUnder):
	// a command that execs its arguments in place, such as
	// "ip netns exec NAME" to run the server inside a network namespace.
	// The child's PID stays the postmaster's own.
	Launcher []string
}

// Start initialises a cluster in a new temporary directory and starts it
// on a free loopback port. The caller must Stop it.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith initialises a cluster in a new directory and starts it as o
// says; it returns once the server accepts connections and the database
// weirtest exists. The caller must Stop it.
func StartWith(o Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s, err := newServer(o, bin, "weir-postgres-")
	if err != nil {
		return nil, err
	}
	if err := s.init(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// newServer fills o's defaults (loopback, a free port) and makes the
// server's directory (named prefix…) and URLs; nothing runs yet.
func newServer(o Options, bin, prefix string) (*Server, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1"
	}
	if o.Port == 0 {
		ports, err := testproc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		o.Port = ports[0]
	}
	dir, err := os.MkdirTemp(o.Dir, prefix)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, bin: bin, dir: dir, Port: o.Port}
	s.URL = fmt.Sprintf("postgres://postgres@%s/weirtest?sslmode=disable", net.JoinHostPort(o.Listen, fmt.Sprint(o.Port)))
	s.SocketURL = s.socketURL("weirtest")
	return s, nil
}

// socketURL is the URL of database db through the server's Unix socket.
func (s *Server) socketURL(db string) string {
	return fmt.Sprintf("postgres:///%s?host=%s&port=%d&user=postgres&sslmode=disable", db, neturl.QueryEscape(s.dir), s.Port)
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// DataDir is the cluster's data directory.
func (s *Server) DataDir() string { return s.dataDir() }

func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

// init runs initdb as the server's OS user, launches the server and
// creates the test database.
func (s *Server) init() error {
	if os.Geteuid() == 0 {
		u, err := OSUser()
		if err != nil {
			return err
		}
		uid, gid, err := testproc.IDs(u)
		if err != nil {
			return err
		}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
		s.runAs = u
	}
	initdb := testproc.Command(s.runAs, filepath.Join(s.bin, "initdb"), "-D", s.dataDir(), "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if s.opts.TrustFrom != "" {
		hba, err := os.OpenFile(filepath.Join(s.dataDir(), "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(hba, "host all all %s trust\n", s.opts.TrustFrom)
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := s.launch(); err != nil {
		return err
	}
	return exec1(s.socketURL("postgres"), "CREATE DATABASE weirtest")
}

// launch starts postgres on the data directory and waits until it accepts
// connections on its socket (a restart appends to the same log).
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if s.runAs != "" {
		uid, gid, err := testproc.IDs(s.runAs)
		if err != nil {
			return err
		}
		if err := logf.Chown(uid, gid); err != nil {
			return err
		}
	}
	// fsync stays on: the tests and benchmarks measure durable commits.
	// Dynamic shared memory lives in the data directory (mmap) rather than
	// in /dev/shm, so a server killed by SIGKILL leaves nothing outside its
	// directory but the small System V segment ReleaseSharedMemory removes.
	s.cmd = testproc.CommandUnder(s.opts.Launcher, s.runAs, filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-c", "listen_addresses="+s.opts.Listen, "-p", fmt.Sprint(s.opts.Port), "-k", s.dir,
		"-c", "max_connections=300", "-c", "log_min_messages=warning",
		"-c", "dynamic_shared_memory_type=mmap")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	go func() { _ = cmd.Wait(); close(done) }()

	admin := s.socketURL("postgres")
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := exec1(admin, "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60s: %v\n%s", err, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is the postmaster's process id (0 before it was first started).
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Exited is closed when the current postmaster has exited — stopped, or
// killed by the test. A Restart or Relaunch makes a new one.
func (s *Server) Exited() <-chan struct{} { return s.done }

// shutdown stops the postmaster by its PID (SIGINT: PostgreSQL's fast
// shutdown; SIGKILL after 30 s) and waits until it has exited.
func (s *Server) shutdown() {
	if s.cmd == nil || s.cmd.Process == nil || s.done == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill SIGKILLs the postmaster by its PID, if it is running. Its backends
// survive it for a while (each runs in a session of its own); a crash of
// the whole server kills them too (internal/testhosts' Host.Kill).
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
	}
}

// Restart stops the server cleanly (fast shutdown) and starts it again on
// the same data directory, address and port; it returns once the server
// accepts connections.
func (s *Server) Restart() error {
	s.shutdown()
	return s.launch()
}

// Relaunch starts the server again after its processes were killed (a
// crash): it removes the shared memory the killed server left
// (ReleaseSharedMemory) and starts postgres on the same data directory,
// which recovers from its write-ahead log; it returns once the server
// accepts connections.
//
// REQUIRES: every process of the server has exited. The postmaster alone
// is not enough — each backend runs in a session of its own — so kill
// them all, as internal/testhosts' Host.Kill does.
func (s *Server) Relaunch() error {
	if s.done == nil {
		return errors.New("pgtest: Relaunch of a server never started")
	}
	select {
	case <-s.done:
	default:
		return errors.New("pgtest: Relaunch of a server whose postmaster is running")
	}
	if err := s.ReleaseSharedMemory(); err != nil {
		return err
	}
	return s.launch()
}

// ReleaseSharedMemory removes what a killed server leaves outside its
// processes — its System V shared memory segment and its lock file — as a
// reboot would. After a clean shutdown (which removes both) it does
// nothing. A segment still attached is an error: some process of the
// server is alive.
func (s *Server) ReleaseSharedMemory() error { return ReleaseSharedMemory(s.dataDir()) }

// Stop shuts the server down by its PID (SIGINT: PostgreSQL's fast
// shutdown; SIGKILL after 30 s), releases any shared memory a killed
// server left, and removes its directory.
func (s *Server) Stop() {
	s.shutdown()
	_ = s.ReleaseSharedMemory()
	os.RemoveAll(s.dir)
}

// Log returns the end of the server's log, for failure messages.
func (s *Server) Log() string { return testproc.Tail(s.logPath()) }
