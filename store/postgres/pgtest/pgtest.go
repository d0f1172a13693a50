// Package pgtest gives tests a real PostgreSQL server: the one named by
// DATABASE_URL when it is set, or else a throwaway cluster this package
// starts from the installed binaries (initdb into a temporary directory,
// loopback only, a free port, fsync on as in production) and stops by PID
// when the test binary ends (Main).
//
// PostgreSQL refuses to run as root. Running as root, the cluster runs as
// the OS user WEIR_PG_OS_USER, else "pgci" (created by .ci/run), else
// Debian's "postgres" user.
//
// Missing binaries skip the test with a message saying what to install,
// except under CI=true, where they fail it: CI has PostgreSQL 15 installed,
// so a missing server there is a broken build, never a silent skip.
//
// Every store a test opens lives in its own schema (Schema), so tests share
// one server without seeing each other's rows; schemas are dropped when the
// test ends.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-stream/weir/internal/testproc"
)

// Server is a running throwaway PostgreSQL cluster.
type Server struct {
	// URL connects to the cluster's test database as its superuser.
	URL string
	// Port is the loopback TCP port the server listens on.
	Port int

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// BinDir finds the PostgreSQL server binaries: WEIR_PG_BINDIR, else
// Debian's /usr/lib/postgresql/<version>/bin (15 preferred, else the
// highest installed), else the directory of initdb on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("WEIR_PG_BINDIR"); d != "" {
		for _, b := range []string{"initdb", "postgres"} {
			if !fileExists(filepath.Join(d, b)) {
				return "", fmt.Errorf("WEIR_PG_BINDIR=%s has no %s", d, b)
			}
		}
		return d, nil
	}
	if fileExists("/usr/lib/postgresql/15/bin/postgres") {
		return "/usr/lib/postgresql/15/bin", nil
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(dirs) > 0 {
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		return filepath.Dir(dirs[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres): install Debian's postgresql-15 (apt-get install -y postgresql-15), set WEIR_PG_BINDIR, or set DATABASE_URL to a server")
}

func versionOf(path string) int {
	var v int
	fmt.Sscan(filepath.Base(filepath.Dir(filepath.Dir(path))), &v)
	return v
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// osUser is the user the server runs as when this process is root.
func osUser() (*user.User, error) {
	names := []string{"pgci", "postgres"}
	if n := os.Getenv("WEIR_PG_OS_USER"); n != "" {
		names = []string{n}
	}
	for _, n := range names {
		if u, err := user.Lookup(n); err == nil {
			return u, nil
		}
	}
	return nil, fmt.Errorf("PostgreSQL refuses to run as root and none of the users %v exists: create one (useradd --system --no-create-home --shell /usr/sbin/nologin pgci) or set WEIR_PG_OS_USER", names)
}

// Start initialises a cluster in a new temporary directory and starts it
// on a free loopback port. The caller must Stop it.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "weir-postgres-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.start(bin); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(bin string) error {
	var runAs *user.User
	if os.Geteuid() == 0 {
		u, err := osUser()
		if err != nil {
			return err
		}
		runAs = u
		var uid, gid int
		fmt.Sscan(u.Uid, &uid)
		fmt.Sscan(u.Gid, &gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := testproc.Command(userName(runAs), filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	ports, err := testproc.FreePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	s.Port = port
	logf, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	if runAs != nil {
		var uid, gid int
		fmt.Sscan(runAs.Uid, &uid)
		fmt.Sscan(runAs.Gid, &gid)
		_ = logf.Chown(uid, gid)
	}
	// fsync stays on: the tests and benchmarks measure durable commits.
	s.cmd = testproc.Command(userName(runAs), filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-p", fmt.Sprint(port), "-k", s.dir,
		"-c", "max_connections=300", "-c", "log_min_messages=warning")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()

	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := exec1(admin, "CREATE DATABASE weirtest")
		if err == nil {
			break
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %s", testproc.Tail(filepath.Join(s.dir, "server.log")))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60s: %v\n%s", err, testproc.Tail(filepath.Join(s.dir, "server.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/weirtest?sslmode=disable", port)
	return nil
}

// Stop shuts the server down by its PID (SIGINT: PostgreSQL's fast
// shutdown; SIGKILL after 30 s) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil && s.done != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

// userName is u's login name, "" for nil (this process's user).
func userName(u *user.User) string {
	if u == nil {
		return ""
	}
	return u.Username
}

// Log returns the end of the server's log, for failure messages.
func (s *Server) Log() string { return testproc.Tail(filepath.Join(s.dir, "server.log")) }

func exec1(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// URL returns the URL of the database the tests use: DATABASE_URL, or the
// shared throwaway server of this test binary, started on first use (Main
// stops it). Missing binaries skip t, or fail it under CI=true.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		if _, err := BinDir(); err != nil {
			missing(t, err)
		}
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		t.Fatalf("start PostgreSQL: %v", sharedErr)
	}
	return shared.URL
}

// Shared returns the server URL started, or nil when DATABASE_URL is set or
// no test has asked for a server yet.
func Shared() *Server {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return shared
}

func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL tests: %v", err)
	}
	t.Skipf("PostgreSQL tests skipped: %v", err)
}

// Main runs the tests of m and then stops the shared server, if one was
// started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	sharedMu.Unlock()
	os.Exit(code)
}

var schemaSeq atomic.Int64

// Schema returns a new schema name, unique in this server across test
// binaries running at once, and drops the schema (if anything created it)
// when t ends.
func Schema(t testing.TB, url string) string {
	t.Helper()
	name := fmt.Sprintf("weirtest_%d_%d", os.Getpid(), schemaSeq.Add(1))
	t.Cleanup(func() {
		if err := exec1(url, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// WithParam returns url with the query parameter key=value added.
func WithParam(url, key, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + neturl.QueryEscape(key) + "=" + neturl.QueryEscape(value)
}

// Exec runs sql on url and fails t on error.
func Exec(t testing.TB, url, sql string) {
	t.Helper()
	if err := exec1(url, sql); err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
}
