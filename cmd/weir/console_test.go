package main

// The web console in headless Chromium (Debian's chromium, driven by
// Playwright from cli/console/web/test/console.e2e.cjs), against the real
// binary: the page loads during a running pipeline, its graph and numbers
// match /status, and its Pause and Start buttons change the state. The
// screenshots are kept under $TMPDIR/weir-artifacts.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testproc"
)

const chromiumPath = "/usr/bin/chromium"

// consoleTools returns node and the console's web directory, or says what
// is missing: under CI=true that fails the test (.ci/run installs them),
// elsewhere it skips it.
func consoleTools(t *testing.T) (node, web string) {
	t.Helper()
	web = filepath.Join("..", "..", "cli", "console", "web")
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node (apt-get install nodejs)")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" (apt-get install chromium)")
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "playwright-core (cd cli/console/web && npm ci)")
	}
	if len(missing) > 0 {
		testproc.Missing(t, "the console test needs "+strings.Join(missing, ", "))
	}
	return node, web
}

func TestConsoleInChromium(t *testing.T) {
	node, web := consoleTools(t)
	const events = 3000
	dir, _ := setup(t, events, 30, 41)
	run := startRun(t, dir, infiniteSpec(t))
	// Wait until everything is counted, so that the numbers hold still.
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct {
			Computations map[string]struct{ Inputs int } `json:"computations"`
		}
		json.Unmarshal([]byte(weir(t, "", "pipeline", "status", "--data", dir)), &st)
		if st.Computations["Counter"].Inputs == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline did not count %d events: %+v\n%s", events, st, run.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	addr, _ := adminFile(t, dir)
	artifacts := filepath.Join(os.TempDir(), "weir-artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	expect, _ := json.Marshal(map[string][]string{
		"nodes": {"Reader", "Counter", "source:Reader:events", "sink:Counter:out"},
		"edges": {"source:Reader:events->Reader", "Reader->Counter", "Counter->sink:Counter:out"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(web, "test", "console.e2e.cjs"))
	cmd.Env = append(os.Environ(), "WEIR_URL=http://"+addr, "WEIR_TOKEN="+adminTokenOf(t, dir),
		"WEIR_EXPECT="+string(expect), "WEIR_ARTIFACTS="+artifacts, "CHROMIUM="+chromiumPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("console e2e in Chromium: %v\n%s\nweir run:\n%s", err, out, run.stderr.String())
	}
	t.Logf("%sscreenshots: %s", out, filepath.Join(artifacts, "console.png"))
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := run.wait(t); err != nil {
		t.Fatalf("weir run: %v\n%s", err, run.stderr.String())
	}
}

// TestConsoleServed: without a browser, the console's page, assets and
// data are served from the admin address, and the data agrees with
// /status (the same snapshot is embedded) and the spec's graph.
func TestConsoleServed(t *testing.T) {
	dir, _ := setup(t, 100, 10, 42)
	run := startRun(t, dir, infiniteSpec(t))
	addr, _ := adminFile(t, dir)
	get := func(path string) (string, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b), resp.Header.Get("Content-Type")
	}
	if page, ct := get("/"); !strings.Contains(page, `src="/console/console.js"`) || !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET /: %s %q", ct, page)
	}
	if js, ct := get("/console/console.js"); len(js) < 1000 || !strings.HasPrefix(ct, "text/javascript") {
		t.Fatalf("GET /console/console.js: %s, %d bytes", ct, len(js))
	}
	body, _ := get("/console/data")
	var d struct {
		Status struct {
			Partitions []struct{ Partition string } `json:"partitions"`
		} `json:"status"`
		Graph struct {
			Nodes []struct{ ID, Kind string } `json:"nodes"`
			Edges []struct{ From, To string } `json:"edges"`
		} `json:"graph"`
		Partitions []struct{ ID, State string } `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, n := range d.Graph.Nodes {
		kinds[n.ID] = n.Kind
	}
	if kinds["Reader"] != "computation" || kinds["Counter"] != "computation" || kinds["source:Reader:events"] != "source" || kinds["sink:Counter:out"] != "sink" || len(d.Graph.Edges) != 3 {
		t.Fatalf("graph %+v", d.Graph)
	}
	if len(d.Partitions) != len(d.Status.Partitions) || len(d.Partitions) != 7 {
		t.Fatalf("%d partitions, /status has %d, the spec 7", len(d.Partitions), len(d.Status.Partitions))
	}
	weir(t, "", "pipeline", "stop", "--data", dir)
	run.wait(t)
}

// TestConsoleBundleCurrent: the committed bundle is what 'npm run build'
// makes of cli/console/web/src (esbuild's output is deterministic), so a
// change to the source cannot ship without its bundle.
func TestConsoleBundleCurrent(t *testing.T) {
	_, web := consoleTools(t)
	tmp := t.TempDir()
	esbuild, err := filepath.Abs(filepath.Join(web, "node_modules", ".bin", "esbuild"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"src/app.js", "--bundle", "--minify", "--format=iife", "--target=es2020", "--outfile=" + filepath.Join(tmp, "console.js")},
		{"src/style.css", "--bundle", "--minify", "--outfile=" + filepath.Join(tmp, "console.css")},
	} {
		cmd := exec.Command(esbuild, c...)
		cmd.Dir = web
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("esbuild %v: %v\n%s", c, err, out)
		}
	}
	for _, f := range []string{"console.js", "console.css"} {
		built, _ := os.ReadFile(filepath.Join(tmp, f))
		committed, _ := os.ReadFile(filepath.Join(web, "..", "dist", f))
		if string(built) != string(committed) {
			t.Errorf("cli/console/dist/%s is stale: run 'npm run build' in cli/console/web and commit it", f)
		}
	}
}
