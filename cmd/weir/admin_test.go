package main

// Operating weir through the real binary: the admin API's defences (token,
// Host, Origin, content type, instance id) and a stale admin.addr.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// infiniteSpec writes the counter example with a non-finite source, so
// that the pipeline runs until it is stopped, and returns its path.
func infiniteSpec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(exampleSpec("counter"))
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(spec, bytes.Replace(b, []byte(`"finite" = %true;`), []byte(`"finite" = %false;`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// running is a 'weir run' started by a test; the test kills it by PID at
// cleanup if it is still running.
type running struct {
	cmd    *exec.Cmd
	stderr *testproc.Buffer
	done   chan error
}

// startRun starts 'weir run' on dir and waits until its admin API answers.
func startRun(t *testing.T, dir, spec string, extra ...string) *running {
	t.Helper()
	args := append([]string{"run", "--data", dir, "--spec", spec, "--progress", "0"}, extra...)
	r := &running{cmd: exec.Command(weirBin, args...), stderr: &testproc.Buffer{}, done: make(chan error, 1)}
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := exec.Command(weirBin, "pipeline", "status", "--data", dir).Run(); err == nil {
			return r
		}
		select {
		case err := <-r.done:
			t.Fatalf("weir run exited: %v\n%s", err, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin API did not come up\n%s", r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the run to exit and returns its error.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		t.Fatalf("weir run did not exit\n%s", r.stderr.String())
		return nil
	}
}

// adminFile returns the address and instance id in DIR/admin.addr.
func adminFile(t *testing.T, dir string) (addr, instance string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "admin.addr"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "instance ") {
		t.Fatalf("admin.addr = %q, want the address and an instance line", b)
	}
	return lines[0], strings.TrimPrefix(lines[1], "instance ")
}

func adminTokenOf(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "admin.token")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token has mode %#o, want 0600", info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestAdminAPIRefusals: each defence of the admin API refuses what it must
// (through the real binary's server), and a request that passes them all
// works. A web page cannot pause the pipeline or write rows.
func TestAdminAPIRefusals(t *testing.T) {
	dir, _ := setup(t, 100, 10, 21)
	run := startRun(t, dir, infiniteSpec(t))
	addr, instance := adminFile(t, dir)
	token := adminTokenOf(t, dir)
	_, port, _ := strings.Cut(addr, ":")

	type req struct {
		name, method, path, host, origin, ctype, auth, instance, body string
		want                                                          int
		says                                                          string
	}
	ok := func(r req) req {
		if r.method == "" {
			r.method = http.MethodPost
		}
		if r.host == "" {
			r.host = addr
		}
		if r.ctype == "" {
			r.ctype = "application/json"
		}
		if r.auth == "" {
			r.auth = "Bearer " + token
		}
		return r
	}
	cases := []req{
		ok(req{name: "no token", path: "/pipeline/pause", auth: "-", want: 401, says: "admin token"}),
		ok(req{name: "wrong token", path: "/pipeline/pause", auth: "Bearer 00", want: 401, says: "admin token"}),
		ok(req{name: "text/plain body", path: "/queues/events/rows", ctype: "text/plain", body: `{"key":"x"}`, want: 415, says: "Content-Type"}),
		ok(req{name: "form body", path: "/pipeline/pause", ctype: "application/x-www-form-urlencoded", want: 415, says: "Content-Type"}),
		ok(req{name: "foreign Host (DNS rebinding)", path: "/pipeline/pause", host: "evil.example:" + port, want: 403, says: "Host"}),
		ok(req{name: "foreign Host on a read", method: http.MethodGet, path: "/status", host: "evil.example:" + port, want: 403, says: "Host"}),
		ok(req{name: "foreign Origin", path: "/pipeline/pause", origin: "http://evil.example", want: 403, says: "Origin"}),
		ok(req{name: "null Origin", path: "/pipeline/pause", origin: "null", want: 403, says: "Origin"}),
		ok(req{name: "other instance", path: "/pipeline/pause", instance: "0123456789abcdef0123456789abcdef", want: 421, says: "stale"}),
		ok(req{name: "partition not a number", path: "/queues/events/rows?partition=abc", ctype: "application/x-ndjson", body: `{"key":"x"}`, want: 400, says: `partition "abc" is not a number`}),
		// Reads need the token too (issue 25 item 11): /status quotes last
		// errors, rows are pipeline data. The console's page does not.
		ok(req{name: "status without a token", method: http.MethodGet, path: "/status", auth: "-", ctype: "-", want: 401, says: "admin token"}),
		ok(req{name: "rows without a token", method: http.MethodGet, path: "/queues/events/rows", auth: "-", ctype: "-", want: 401, says: "admin token"}),
		ok(req{name: "metrics without a token", method: http.MethodGet, path: "/metrics", auth: "-", ctype: "-", want: 401, says: "admin token"}),
		ok(req{name: "console data without a token", method: http.MethodGet, path: "/console/data", auth: "-", ctype: "-", want: 401, says: "admin token"}),
		ok(req{name: "the console page holds no data", method: http.MethodGet, path: "/", auth: "-", ctype: "-", want: 200}),
		ok(req{name: "everything right: a read", method: http.MethodGet, path: "/status", ctype: "-", want: 200, says: `"state"`}),
		ok(req{name: "everything right: write a row", path: "/queues/events/rows", ctype: "application/x-ndjson", origin: "http://" + addr, instance: instance, body: `{"key":"ok"}`, want: 200, says: "Written"}),
	}
	for _, c := range cases {
		r, err := http.NewRequest(c.method, "http://"+addr+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		r.Host = c.host
		for h, v := range map[string]string{"Origin": c.origin, "Content-Type": c.ctype, "Authorization": c.auth, "X-Weir-Instance": c.instance} {
			if v != "" && v != "-" {
				r.Header.Set(h, v)
			}
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(body.String(), c.says) {
			t.Errorf("%s: %d %q, want %d mentioning %q", c.name, resp.StatusCode, body.String(), c.want, c.says)
		}
	}
	// A body above the limit is refused before it is read (a raw request:
	// its declared length is all the server needs).
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /queues/events/rows HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n", addr, token, 200<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	conn.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 200 MiB body: %d, want 413", resp.StatusCode)
	}
	// None of the refused pauses reached the controller.
	if out := weir(t, "", "pipeline", "status", "--data", dir); !strings.Contains(out, `"state": "working"`) {
		t.Fatalf("state after refused requests:\n%s", out)
	}
	// The CLI sends the token by itself, or takes it from WEIR_ADMIN_TOKEN.
	cmd := exec.Command(weirBin, "pipeline", "pause", "--data", dir)
	cmd.Env = append(os.Environ(), "WEIR_ADMIN_TOKEN=wrong")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "admin token") {
		t.Fatalf("pause with a wrong WEIR_ADMIN_TOKEN: %v %s", err, out)
	}
	// A token shorter than 16 bytes is refused (it could be guessed).
	cmd = exec.Command(weirBin, "pipeline", "status", "--data", dir)
	cmd.Env = append(os.Environ(), "WEIR_ADMIN_TOKEN=short")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "at least 16") {
		t.Fatalf("status with a 5-byte WEIR_ADMIN_TOKEN: %v %s", err, out)
	}
	// More rows than one request may carry go in chunks, numbered across
	// them (an error names the line in the whole input).
	var big strings.Builder
	pad := strings.Repeat("x", 1000)
	n := 0
	for big.Len() < 40<<20 {
		fmt.Fprintf(&big, `{"key":"k%d","pad":%q}`+"\n", n%7, pad)
		n++
	}
	if out := weir(t, big.String(), "queue", "write", "--data", dir, "events"); !strings.Contains(out, fmt.Sprintf("wrote %d rows", n)) {
		t.Fatalf("a 40 MiB write through the admin API: %s", out)
	}
	big.WriteString("{not json\n")
	cmd = exec.Command(weirBin, "queue", "write", "--data", dir, "events")
	cmd.Stdin = strings.NewReader(big.String())
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), fmt.Sprintf("line %d:", n+1)) || !strings.Contains(string(out), "rows before it") {
		t.Fatalf("a bad last line after 40 MiB: %v %s", err, out)
	}
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := run.wait(t); err != nil {
		t.Fatalf("weir run: %v\n%s", err, run.stderr.String())
	}
}

// TestControllerAdminWithoutToken (issue 25 item 12): 'weir controller'
// without --token-file applies the embedded admin API's Host and Origin
// rules, so that a DNS-rebinding page cannot read its status.
func TestControllerAdminWithoutToken(t *testing.T) {
	base := pgtest.URL(t)
	url := pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base))
	weir(t, "", "store", "init", "--store", url)
	weir(t, "", "queue", "create", "--store", url, "--partitions", "1", "events")
	weir(t, "", "queue", "create", "--store", url, "--partitions", "1", "counts")
	ctl := startCluster(t, "controller", "--store", url, "--spec", infiniteSpec(t), "--id", "c", "--admin", "127.0.0.1:0")
	addr := ctl.await(t, regexp.MustCompile(`admin API at (127\.0\.0\.1:\d+)`))[1]
	_, port, _ := strings.Cut(addr, ":")
	for _, c := range []struct {
		name, host, origin string
		want               int
	}{
		{"loopback Host", addr, "", 200},
		{"localhost Host", "localhost:" + port, "", 200},
		{"rebound Host", "evil.example:" + port, "", 403},
		{"cross-site Origin", addr, "http://evil.example", 403},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

// TestStaleAdminAddr: after a SIGKILL, DIR/admin.addr still names a port
// that another pipeline then listens on. Commands meant for the killed
// pipeline must not reach the other one: queue writes go to the killed
// pipeline's own store and 'pipeline stop' says nothing runs there.
func TestStaleAdminAddr(t *testing.T) {
	dirA, _ := setup(t, 100, 10, 22)
	spec := infiniteSpec(t)
	a := startRun(t, dirA, spec)
	addr, _ := adminFile(t, dirA)
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.wait(t)

	dirB, _ := setup(t, 100, 10, 23)
	b := startRun(t, dirB, spec, "--admin", addr)
	if got, _ := adminFile(t, dirB); got != addr {
		t.Fatalf("B listens on %s, want the port A had (%s)", got, addr)
	}

	weir(t, "{\"key\":\"for-A\"}\n", "queue", "write", "--data", dirA, "events")
	out, err := exec.Command(weirBin, "pipeline", "stop", "--data", dirA).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no weir is running on "+dirA) {
		t.Fatalf("pipeline stop --data A with a stale admin.addr: %v %s", err, out)
	}
	if st := weir(t, "", "pipeline", "status", "--data", dirB); !strings.Contains(st, `"state": "working"`) {
		t.Fatalf("B was affected by commands meant for A:\n%s", st)
	}
	if got := weir(t, "", "queue", "list", "--data", dirB); !strings.Contains(got, "events\t3 partitions\t100 rows") {
		t.Fatalf("B's events queue changed: %q", got)
	}
	weir(t, "", "pipeline", "stop", "--data", dirB)
	if err := b.wait(t); err != nil {
		t.Fatalf("B: %v\n%s", err, b.stderr.String())
	}
	if got := weir(t, "", "queue", "list", "--data", dirA); !strings.Contains(got, "events\t3 partitions\t101 rows") {
		t.Fatalf("the row meant for A is not in A's store: %q", got)
	}
}
