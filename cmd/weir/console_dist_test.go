package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/disttest"
	"github.com/weir-stream/weir/internal/testproc"
	"github.com/weir-stream/weir/store/open"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

// clusterProc is a 'weir worker' or 'weir controller' started by a test
// (killed by PID at cleanup if still running).
type clusterProc struct {
	cmd  *exec.Cmd
	out  *testproc.Buffer
	done chan struct{}
}

func startCluster(t *testing.T, args ...string) *clusterProc {
	t.Helper()
	p := &clusterProc{cmd: exec.Command(weirBin, args...), out: &testproc.Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// await waits for re to match the process's output and returns the match.
func (p *clusterProc) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%v exited:\n%s", p.cmd.Args, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%v: no %q in a minute:\n%s", p.cmd.Args, re, p.out.String())
	return nil
}

// TestConsoleDistributedInChromium: 'weir controller' serves the same
// console for a pipeline on two workers ('weir worker'), over PostgreSQL,
// with a cluster token: the page and assets load without it, the data only
// with the token the page takes from its URL fragment. The graph and
// numbers equal the controller's /status, the workers view lists the
// workers with their jobs and its Drain button drains one, nothing
// overflows at 420 px, and when the controller exits the page says it is
// disconnected. A standby controller's console says it stands by and names
// the active one.
func TestConsoleDistributedInChromium(t *testing.T) {
	consoleTools(t)
	base := pgtest.URL(t)
	url := pgtest.WithParam(base, "weir_schema", pgtest.Schema(t, base))
	ctx := context.Background()
	if _, err := open.Init(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := open.Store(ctx, url, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const events = 2000
	c, err := disttest.NewCounter(ctx, st, 3, 2)
	if err == nil {
		err = c.Write(ctx, rand.New(rand.NewPCG(26, 1)), events, 30, 500)
	}
	if err != nil {
		t.Fatal(err)
	}
	const token = "console-test-cluster-token"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	for i, port := range ports {
		w := startCluster(t, "worker", "--store", url, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", fmt.Sprintf("worker-%d", i), "--token-file", tokenFile)
		w.await(t, regexp.MustCompile(`listening on`))
	}
	ctl := startCluster(t, "controller", "--store", url, "--spec", infiniteSpec(t), "--id", "controller-a", "--token-file", tokenFile)
	addr := ctl.await(t, regexp.MustCompile(`admin API at (\S+)`))[1]
	ctl.await(t, regexp.MustCompile(`web console: http://`+regexp.QuoteMeta(addr)+`/ \(open it with #token=`))

	get := func(path string, auth bool) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return http.DefaultClient.Do(req)
	}
	// The page holds no data: served without the token; the data is not.
	for path, want := range map[string]int{"/": 200, "/console/console.js": 200, "/console/data": 401, "/status": 401} {
		resp, err := get(path, false)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without the token: %d, want %d", path, resp.StatusCode, want)
		}
	}
	// Wait until every event is counted, so that the numbers hold still.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var s struct {
			Active   bool `json:"active"`
			Pipeline struct {
				Computations map[string]struct{ Inputs int } `json:"computations"`
			} `json:"pipeline"`
		}
		if resp, err := get("/status", true); err == nil {
			json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
		}
		if s.Active && s.Pipeline.Computations["Counter"].Inputs == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline did not count %d events: %+v\n%s", events, s, ctl.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A standby controller's console says it stands by, and who leads.
	standby := startCluster(t, "controller", "--store", url, "--spec", infiniteSpec(t), "--id", "controller-b", "--token-file", tokenFile)
	standbyAddr := standby.await(t, regexp.MustCompile(`admin API at (\S+)`))[1]
	req, _ := http.NewRequest(http.MethodGet, "http://"+standbyAddr+"/console/data", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sb struct {
		Mode   string `json:"mode"`
		Active bool   `json:"active"`
		Leader struct {
			ID string `json:"id"`
		} `json:"leader"`
		Graph struct{ Nodes []struct{ ID string } } `json:"graph"`
	}
	json.NewDecoder(resp.Body).Decode(&sb)
	resp.Body.Close()
	if sb.Mode != "controller" || sb.Active || sb.Leader.ID != "controller-a" || len(sb.Graph.Nodes) != 4 {
		t.Errorf("the standby's console data: %+v, want a standby naming controller-a, with the spec's 4 nodes", sb)
	}

	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	consoleE2E(t, "distributed", addr, token, map[string]any{
		"nodes": []string{"Reader", "Counter", "source:Reader:events", "sink:Counter:out"},
		"edges": []string{"source:Reader:events->Reader", "Reader->Counter", "Counter->sink:Counter:out"},
	}, map[string]func(){
		// Once the numbers are checked, more events flow (for the
		// screenshots' rates).
		"step: a computation's details, opened with the keyboard": func() {
			go c.Write(feedCtx, rand.New(rand.NewPCG(27, 1)), 20000, 30, 100)
		},
		"waiting for the process to end": func() { ctl.cmd.Process.Signal(syscall.SIGTERM) },
	})
	select {
	case <-ctl.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the controller did not exit after SIGTERM:\n%s", ctl.out.String())
	}
	if strings.Contains(ctl.out.String(), token) {
		t.Errorf("the controller's output holds the token")
	}
}
