// Package pgtest gives tests a real PostgreSQL server: the one named by
// DATABASE_URL when it is set, or else a throwaway cluster this package
// starts from the installed binaries (initdb into a temporary directory,
// loopback only, a free port, fsync on as in production) and stops by PID
// when the test binary ends (Main).
//
// PostgreSQL refuses to run as root. Running as root, the cluster runs as
// the OS user WEIR_PG_OS_USER, else "pgci" (created by .ci/run), else
// Debian's "postgres" user (OSUser).
//
// Missing binaries skip the test with a message saying what to install,
// except under CI=true, where they fail it: CI has PostgreSQL 15 installed,
// so a missing server there is a broken build, never a silent skip.
//
// Every store a test opens lives in its own schema (Schema), so tests share
// one server without seeing each other's rows; schemas are dropped when the
// test ends.
//
// server.go is one cluster's life (StartWith's Options place it on another
// address or inside a network namespace, as internal/testhosts does;
// Restart, Relaunch after a crash), shm.go the shared memory a killed
// server leaves, proxy.go a wire-protocol proxy that cuts connections.
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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-stream/weir/internal/testproc"
)

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

// OSUser is the OS user servers run as when this process is root
// (PostgreSQL refuses to run as root): WEIR_PG_OS_USER, else "pgci"
// (created by .ci/run), else Debian's "postgres".
func OSUser() (string, error) {
	names := []string{"pgci", "postgres"}
	if n := os.Getenv("WEIR_PG_OS_USER"); n != "" {
		names = []string{n}
	}
	for _, n := range names {
		if _, err := user.Lookup(n); err == nil {
			return n, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL refuses to run as root and none of the users %v exists: create one (useradd --system --no-create-home --shell /usr/sbin/nologin pgci) or set WEIR_PG_OS_USER", names)
}

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
			testproc.Missing(t, "PostgreSQL tests: "+err.Error())
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

// Require skips t when no PostgreSQL server binaries are installed, or
// fails it under CI=true; for tests that start servers of their own
// (StartWith) rather than use URL's.
func Require(t testing.TB) {
	t.Helper()
	if _, err := BinDir(); err != nil {
		testproc.Missing(t, "PostgreSQL tests: "+err.Error())
	}
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
