package main

// The web console in headless Chromium (Debian's chromium, driven by
// Playwright from cli/console/web/test/console.e2e.cjs), against the real
// binary: the page loads during a running pipeline, its graph and numbers
// match /status, and its Pause and Start buttons change the state. The
// screenshots are kept under $TMPDIR/weir-artifacts.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

// consoleE2E runs cli/console/web/test/console.e2e.cjs in mode against
// the admin API at addr. When the script prints a line of hooks, its
// function runs ("waiting for the process to end": the test ends the
// process). The screenshots go to $TMPDIR/weir-artifacts (the test logs
// their paths).
func consoleE2E(t *testing.T, mode, addr, token string, expect map[string]any, hooks map[string]func()) string {
	t.Helper()
	node, web := consoleTools(t)
	artifacts := filepath.Join(os.TempDir(), "weir-artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	ex, _ := json.Marshal(expect)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(web, "test", "console.e2e.cjs"))
	cmd.Env = append(os.Environ(), "WEIR_MODE="+mode, "WEIR_URL=http://"+addr, "WEIR_TOKEN="+token,
		"WEIR_EXPECT="+string(ex), "WEIR_ARTIFACTS="+artifacts, "CHROMIUM="+chromiumPath)
	var out testproc.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, pw), &out
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if f := hooks[sc.Text()]; f != nil {
				f()
			}
		}
	}()
	err := cmd.Run()
	pw.Close()
	if err != nil {
		t.Fatalf("console e2e (%s) in Chromium: %v\n%s", mode, err, out.String())
	}
	t.Logf("%sscreenshots in %s", out.String(), artifacts)
	return out.String()
}

// TestConsoleInChromium: a healthy pipeline. The graph has every node and
// edge, readable; the tables equal /status; the epochs, watermarks, rate
// window and a computation's details (opened by keyboard) work; Pause and
// Start work behind the token and the header follows them; no view
// overflows sideways at 420 px (nor at 2560); and once Stop has ended
// 'weir run', the page says it is disconnected.
func TestConsoleInChromium(t *testing.T) {
	consoleTools(t)
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
	consoleE2E(t, "run", addr, adminTokenOf(t, dir), map[string]any{
		"nodes": []string{"Reader", "Counter", "source:Reader:events", "sink:Counter:out"},
		"edges": []string{"source:Reader:events->Reader", "Reader->Counter", "Counter->sink:Counter:out"},
	}, nil)
	if err := run.wait(t); err != nil {
		t.Fatalf("weir run: %v\n%s", err, run.stderr.String())
	}
}

// TestConsoleLargeGraphInChromium: a pipeline of 25 computations (a
// reader fanning out to six chains of four counters) draws every node at
// actual size, readable and without overlaps, scrolling in its box rather
// than the page, at 1400 px and at 420 px.
func TestConsoleLargeGraphInChromium(t *testing.T) {
	consoleTools(t)
	dir, _ := setup(t, 300, 10, 43)
	var comps, streams strings.Builder
	comps.WriteString(`"Reader" = {"computation_class_name" = "SwiftPassthrough"; "source_streams" = {"events" = {"source_class_name" = "QueueSource";
        "parameters" = {"queue_path" = "events"; "consumer_path" = "c"; "finite" = %false}}}; "output_stream_ids" = ["words"]};
`)
	streams.WriteString(`"words" = {}; `)
	var nodes []string
	for b := 1; b <= 6; b++ {
		in := "words"
		for d := 1; d <= 4; d++ {
			name := fmt.Sprintf("Count%d%d", b, d)
			out := "s" + name[5:]
			sink := ""
			if d == 4 {
				sink = `"sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["` + out + `"]; "parameters" = {"queue_path" = "counts"}}};`
			}
			fmt.Fprintf(&comps, `"%s" = {"computation_class_name" = "Counter"; "group_by" = ["key"]; "partition_count" = 1; "input_stream_ids" = ["%s"]; "output_stream_ids" = ["%s"]; %s};
`, name, in, out, sink)
			fmt.Fprintf(&streams, `"%s" = {}; `, out)
			nodes = append(nodes, name)
			in = out
		}
	}
	spec := writeSpec(t, "large.yson", `"computations" = {`+comps.String()+`}; "streams" = {`+streams.String()+`};`)
	run := startRun(t, dir, spec)
	addr, _ := adminFile(t, dir)
	consoleE2E(t, "large", addr, adminTokenOf(t, dir), map[string]any{"nodes": nodes}, nil)
	weir(t, "", "pipeline", "stop", "--data", dir)
	if err := run.wait(t); err != nil {
		t.Fatalf("weir run: %v\n%s", err, run.stderr.String())
	}
}

// failingConsoleSpec: Check (Refuse, reading queue events itself) → kept →
// Counter (keyed, 4 partitions) → queue counts, and Mirror (keyed) → queue
// copies (Explode: it would panic on the poison row, which never reaches
// it). Check fails on the poison row, again and again.
func failingConsoleSpec(t *testing.T) string {
	src := strings.Replace(eventsSource, "%true", "%false", 1)
	return writeSpec(t, "failing.yson", `"computations" = {
    "Check" = {"computation_class_name" = "Refuse"; `+src+` "output_stream_ids" = ["kept"]};
    "Counter" = {"computation_class_name" = "Counter"; "group_by" = ["key"]; "partition_count" = 4;
        "input_stream_ids" = ["kept"]; "output_stream_ids" = ["counts"];
        "sinks" = {"counts" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["counts"]; "parameters" = {"queue_path" = "out"}}}};
    "Mirror" = {"computation_class_name" = "Explode"; "group_by" = ["key"]; "partition_count" = 2; "input_stream_ids" = ["kept"]; "output_stream_ids" = ["copies"];
        "sinks" = {"copies" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["copies"]; "parameters" = {"queue_path" = "copies"}}}};
};
"streams" = {"kept" = {}; "counts" = {}; "copies" = {}};
`+restartFast)
}

// TestConsoleFailingInChromium: a partition failing on a poison row is
// marked on the graph within a second of /status listing it, and the
// header says the pipeline is degraded; the failures view shows the whole
// error (as /status has it), the message's origin (source, partition,
// offset), the poison row itself, the restart history and the CLI
// commands; the last error is readable whole at 1400 px; nothing
// overflows at 420 px.
func TestConsoleFailingInChromium(t *testing.T) {
	consoleTools(t)
	bin := mustUserBin(t)
	dir := poisonSetup(t, 200)
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "1", "copies")
	p := start(t, bin, nil, "run", "--data", dir, "--spec", failingConsoleSpec(t), "--progress", "0", "--drain-timeout", "2s")
	var addr string
	poll(t, "the admin API", p, func() bool {
		if _, err := os.Stat(filepath.Join(dir, "admin.addr")); err != nil {
			return false
		}
		addr, _ = adminFile(t, dir)
		return true
	})
	// Partition 1 keeps receiving rows, so that the healthy part flows.
	feedCtx, stopFeed := context.WithCancel(context.Background())
	defer stopFeed()
	go func() {
		for i := 0; feedCtx.Err() == nil; i++ {
			var rows strings.Builder
			for j := 0; j < 40; j++ {
				fmt.Fprintf(&rows, `{"key": "k%02d", "i": %d}`+"\n", j%20, 1000+i*40+j)
			}
			cmd := exec.Command(weirBin, "queue", "write", "--data", dir, "--partition", "1", "events")
			cmd.Stdin = strings.NewReader(rows.String())
			cmd.Run()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	consoleE2E(t, "failing", addr, adminTokenOf(t, dir), map[string]any{
		"nodes":   []string{"Check", "Counter", "Mirror", "source:Check:events", "sink:Counter:counts", "sink:Mirror:copies"},
		"edges":   []string{"source:Check:events->Check", "Check->Counter", "Check->Mirror"},
		"failing": "Check", "poison": `"poison":true`, "poisonError": "Refuse: this row is poison",
	}, nil)
}

// TestConsoleServed: without a browser, the console's page, assets and
// data are served from the admin address, and the data agrees with
// /status (the same snapshot is embedded) and the spec's graph.
func TestConsoleServed(t *testing.T) {
	dir, _ := setup(t, 100, 10, 42)
	run := startRun(t, dir, infiniteSpec(t))
	addr, _ := adminFile(t, dir)
	token := adminTokenOf(t, dir)
	get := func(path string) (string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token) // the data needs it; the page does not
		resp, err := http.DefaultClient.Do(req)
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
