// Package chserver starts a real ClickHouse server (Debian's
// clickhouse-server, 18.16 on Debian 12) with a ZooKeeper (Debian's
// zookeeper) for the tests of package clickhouse: on loopback, on free
// ports, in a temporary directory, as the packages' own users when running
// as root. Servers are stopped by PID.
//
// A missing package skips the test with a message naming the apt-get
// command, except under CI=true, where it fails the test: CI installs the
// packages (.ci/run), so a missing server there is a broken build, never a
// silent skip.
package chserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

// Paths of the Debian packages.
const (
	serverBin    = "/usr/sbin/clickhouse-server"
	serverConfig = "/etc/clickhouse-server/config.xml"
	usersConfig  = "/etc/clickhouse-server/users.xml"
	zkJar        = "/usr/share/java/zookeeper.jar"
	zkConfDir    = "/etc/zookeeper/conf"
)

// Server is a running ClickHouse with its ZooKeeper.
type Server struct {
	// HTTP is the server's HTTP endpoint, "http://127.0.0.1:<port>".
	HTTP string
	dir  string
	ch   *exec.Cmd
	zk   *exec.Cmd
}

// Require skips (or, under CI=true, fails) the test when the packages are
// not installed.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []string{serverBin, serverConfig, zkJar} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, "java")
	}
	if len(missing) == 0 {
		return
	}
	testproc.Missing(t, fmt.Sprintf("ClickHouse tests need Debian's clickhouse-server and zookeeper (missing %v): apt-get install -y --no-install-recommends clickhouse-server clickhouse-client zookeeper", missing))
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the package's server, starting it on first use. The test
// binary's TestMain stops it with StopShared.
func Shared(t testing.TB) *Server {
	t.Helper()
	Require(t)
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatalf("start ClickHouse: %v", sharedErr)
	}
	return shared
}

// StopShared stops the shared server if it was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Start starts ZooKeeper and ClickHouse and waits until both answer.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "weir-clickhouse-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	ports, err := testproc.FreePorts(4)
	if err != nil {
		return err
	}
	httpPort, tcpPort, interPort, zkPort := ports[0], ports[1], ports[2], ports[3]
	asRoot := os.Geteuid() == 0
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"data", "log", "config.d", "zk"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	cfg, err := os.ReadFile(serverConfig)
	if err != nil {
		return err
	}
	c := string(cfg)
	for _, r := range [][2]string{
		{"/var/log/clickhouse-server", filepath.Join(s.dir, "log")},
		{"/var/lib/clickhouse/", filepath.Join(s.dir, "data") + "/"},
		{"<http_port>8123</http_port>", fmt.Sprintf("<http_port>%d</http_port>", httpPort)},
		{"<tcp_port>9000</tcp_port>", fmt.Sprintf("<tcp_port>%d</tcp_port>", tcpPort)},
		{"<interserver_http_port>9009</interserver_http_port>", fmt.Sprintf("<interserver_http_port>%d</interserver_http_port>", interPort)},
		{"<interserver_http_host>example.yandex.ru</interserver_http_host>", "<interserver_http_host>127.0.0.1</interserver_http_host>"},
		{"<listen_host>::1</listen_host>", ""},
	} {
		c = strings.ReplaceAll(c, r[0], r[1])
	}
	files := map[string]string{
		"config.xml": c,
		"config.d/zk.xml": fmt.Sprintf(`<yandex>
  <zookeeper><node><host>127.0.0.1</host><port>%d</port></node></zookeeper>
  <macros><shard>01</shard><replica>r1</replica></macros>
</yandex>
`, zkPort),
		"zoo.cfg": fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n",
			filepath.Join(s.dir, "zk"), zkPort),
	}
	users, err := os.ReadFile(usersConfig)
	if err != nil {
		return err
	}
	files["users.xml"] = string(users)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	if asRoot {
		for _, d := range []string{"data", "log"} {
			if err := chownAll(filepath.Join(s.dir, d), "clickhouse"); err != nil {
				return err
			}
		}
		if err := chownAll(filepath.Join(s.dir, "zk"), "zookeeper"); err != nil {
			return err
		}
	}
	zkLog, err := os.Create(filepath.Join(s.dir, "zk.log"))
	if err != nil {
		return err
	}
	defer zkLog.Close()
	s.zk = testproc.Command(runAs(asRoot, "zookeeper"), "java", "-Xmx256m", "-cp", zkConfDir+":"+zkJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
	s.zk.Stdout, s.zk.Stderr = zkLog, zkLog
	if err := s.zk.Start(); err != nil {
		return fmt.Errorf("start zookeeper: %w", err)
	}
	if err := waitFor(30*time.Second, func() bool { return zkOK(zkPort) }); err != nil {
		return fmt.Errorf("zookeeper did not answer ruok: %w\n%s", err, testproc.Tail(filepath.Join(s.dir, "zk.log")))
	}
	chLog, err := os.Create(filepath.Join(s.dir, "stdout.log"))
	if err != nil {
		return err
	}
	defer chLog.Close()
	s.ch = testproc.Command(runAs(asRoot, "clickhouse"), serverBin, "--config-file="+filepath.Join(s.dir, "config.xml"))
	s.ch.Dir = s.dir
	s.ch.Stdout, s.ch.Stderr = chLog, chLog
	if err := s.ch.Start(); err != nil {
		return fmt.Errorf("start clickhouse-server: %w", err)
	}
	s.HTTP = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	// Ready when its ZooKeeper session works: a Replicated table created
	// before that fails.
	if err := waitFor(60*time.Second, func() bool {
		_, err := s.Query("SELECT count() FROM system.zookeeper WHERE path = '/'")
		return err == nil
	}); err != nil {
		return fmt.Errorf("clickhouse-server did not answer: %w\n%s\n%s", err, testproc.Tail(filepath.Join(s.dir, "stdout.log")),
			testproc.Tail(filepath.Join(s.dir, "log", "clickhouse-server.err.log")))
	}
	return nil
}

// Stop stops ClickHouse, then ZooKeeper, by PID, and removes the directory.
func (s *Server) Stop() {
	for _, c := range []*exec.Cmd{s.ch, s.zk} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

// Query runs sql over HTTP and returns the answer; a non-200 answer is an
// error with the server's text.
func (s *Server) Query(sql string) (string, error) {
	return s.Post(sql, nil)
}

// Post runs query with body over HTTP.
func (s *Server) Post(query string, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.HTTP+"/?query="+url.QueryEscape(query), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// MustQuery is Query that fails the test on error.
func (s *Server) MustQuery(t testing.TB, sql string) string {
	t.Helper()
	out, err := s.Query(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// Host returns the HTTP endpoint as "127.0.0.1:<port>".
func (s *Server) Host() string { return strings.TrimPrefix(s.HTTP, "http://") }

func chownAll(dir, name string) error {
	uid, gid, err := testproc.IDs(name)
	if err != nil {
		return fmt.Errorf("user %s (created by its Debian package): %w", name, err)
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func zkOK(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return string(b) == "imok"
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// runAs is the user a server runs as: its Debian package's when running
// as root, else this process's ("").
func runAs(asRoot bool, pkgUser string) string {
	if asRoot {
		return pkgUser
	}
	return ""
}
