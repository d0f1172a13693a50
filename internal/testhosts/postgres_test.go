package testhosts

// Tests of PostgreSQL as a host: it accepts connections from another host
// (and from the test process over the switch and through its socket), a
// partition of its host cuts the network path but not the socket, and
// committed data survives a clean restart and a SIGKILL of every process
// of the server followed by a relaunch (crash recovery), while a
// transaction open at the crash is gone. A killed server's shared memory
// is released at once.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestPostgresHost(t *testing.T) {
	pgtest.Require(t)
	n := New(t, "pg", "app")
	pgHost, app := n.Host("pg"), n.Host("app")
	began := time.Now()
	pg, err := pgHost.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("initdb + start in a host: %v", time.Since(began))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(pg.Log())
		}
	})
	if want := "@" + pgHost.Address(PostgresPort) + "/"; !strings.Contains(pg.URL(), want) {
		t.Fatalf("URL %s does not name the host's address %s", pg.URL(), want)
	}
	sql := func(stmts ...string) string {
		t.Helper()
		return mustRunHelper(t, app, append([]string{"sql", pg.URL()}, stmts...)...)
	}
	rows := func() string { t.Helper(); return sql("SELECT k, v FROM kv ORDER BY k") }

	sql("CREATE TABLE kv (k int PRIMARY KEY, v text)", "INSERT INTO kv VALUES (1, 'one')")
	if got := queryVia(t, pg.SocketURL(), nil); got != "1" {
		t.Fatalf("through the socket: %s rows, want 1", got)
	}
	if got := queryVia(t, pg.URL(), n.Dial); got != "1" {
		t.Fatalf("from the switch: %s rows, want 1", got)
	}

	// A partition of the server's host cuts the network, not the socket.
	if err := pgHost.Partition(); err != nil {
		t.Fatal(err)
	}
	if out, code := runHelper(t, app, "sql", pgtest.WithParam(pg.URL(), "connect_timeout", "1"), "SELECT 1"); code == helperOK {
		t.Fatalf("app reached a partitioned server: %q", out)
	}
	if got := queryVia(t, pg.SocketURL(), nil); got != "1" {
		t.Fatalf("through the socket while partitioned: %s rows, want 1", got)
	}
	if err := pgHost.Heal(); err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart: %v", time.Since(began))
	if got := rows(); got != "1,one\n" {
		t.Fatalf("after a restart: %q", got)
	}
	sql("INSERT INTO kv VALUES (2, 'two')")

	// A transaction left open at the crash must not survive it.
	ctx := context.Background()
	open, err := pgx.Connect(ctx, pg.SocketURL())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)
	if _, err := open.Exec(ctx, "BEGIN; INSERT INTO kv VALUES (99, 'uncommitted')"); err != nil {
		t.Fatal(err)
	}

	for round, want := range []string{"1,one\n2,two\n", "1,one\n2,two\n3,three\n"} {
		key, id := segmentOf(t, pg)
		began = time.Now()
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
		crashed := time.Since(began)
		if pids, err := pgHost.PIDs(); err != nil || len(pids) != 0 {
			t.Fatalf("after Crash the server's host has processes %v (%v)", pids, err)
		}
		if segmentExists(t, key, id) {
			t.Fatalf("after Crash the server's shared memory segment %d (key %d) is still there", id, key)
		}
		began = time.Now()
		if err := pg.Relaunch(); err != nil {
			t.Fatal(err)
		}
		t.Logf("crash %d: kill %v, relaunch with crash recovery %v", round+1, crashed, time.Since(began))
		if got := rows(); got != want {
			t.Fatalf("after crash %d: rows %q, want %q", round+1, got, want)
		}
		sql("INSERT INTO kv VALUES (3, 'three') ON CONFLICT DO NOTHING")
	}
}

// queryVia counts kv's rows through url, dialing with dial when not nil.
func queryVia(t *testing.T, url string, dial func(context.Context, string, string) (net.Conn, error)) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if dial != nil {
		cfg.DialFunc = dial
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer c.Close(ctx)
	var count int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM kv").Scan(&count); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(count)
}

// segmentOf reads the running server's System V segment from its lock file.
func segmentOf(t *testing.T, pg *Postgres) (key int32, id int) {
	t.Helper()
	b, err := os.ReadFile(pg.DataDir() + "/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var k uint64
	if len(lines) < 7 {
		t.Fatalf("postmaster.pid: %q", b)
	}
	if _, err := fmt.Sscan(lines[6], &k, &id); err != nil {
		t.Fatalf("postmaster.pid line 7 %q: %v", lines[6], err)
	}
	return int32(k), id
}

// segmentExists reports whether /proc/sysvipc/shm lists segment id with key.
func segmentExists(t *testing.T, key int32, id int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		var k, i int64
		if n, _ := fmt.Sscan(line, &k, &i); n == 2 && int32(k) == key && int(i) == id {
			return true
		}
	}
	return false
}
