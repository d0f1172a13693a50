package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/testproc"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/wire"
)

// runCLIIn is runCLI with stdin.
func runCLIIn(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, Options{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s; last: %s", d, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPipelineRescale: 'weir pipeline rescale Counter 2' on a running 'weir
// run' (an unbounded queue source, Counter on the spec's 4 partitions)
// records the target, the controller carries it out live and GET /status
// lists it done; the counts stay exactly once across it (each key's counts
// are 1..n, once each). A bad N is refused locally naming it, a source
// computation by the API saying why, and a bad body field with a 400
// naming the field.
func TestPipelineRescale(t *testing.T) {
	dir := t.TempDir()
	text, err := os.ReadFile(filepath.Join("..", "examples", "counter", "spec.yson"))
	if err != nil {
		t.Fatal(err)
	}
	unbounded := strings.Replace(string(text), `"finite" = %true;`, `"finite" = %false;`, 1)
	if unbounded == string(text) {
		t.Fatal("the counter example's spec no longer has a finite source")
	}
	specPath := filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(specPath, []byte(unbounded), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ name, parts string }{{"events", "2"}, {"counts", "1"}} {
		if code, _, errOut := runCLI("queue", "create", "--data", dir, "--partitions", q.parts, q.name); code != 0 {
			t.Fatalf("queue create %s: exit %d: %s", q.name, code, errOut)
		}
	}

	var runOut, runErr testproc.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"run", "--data", dir, "--spec", specPath, "--progress", "0", "-v"}, Options{Stdout: &runOut, Stderr: &runErr})
	}()
	stopped := false
	defer func() {
		if !stopped {
			runCLI("pipeline", "pause", "--data", dir)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
		}
	}()
	eventually(t, 10*time.Second, "weir run's admin API is not up", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("weir run exited %d: %s", code, runErr.String())
		default:
		}
		_, ok := runningAdmin(dir)
		return ok, runErr.String()
	})

	const keys = 5
	written := map[string]int{}
	write := func(perKey int) {
		t.Helper()
		var rows strings.Builder
		for i := 0; i < perKey; i++ {
			for k := 0; k < keys; k++ {
				fmt.Fprintf(&rows, `{"key": "k%d", "i": %d}`+"\n", k, i)
				written[fmt.Sprintf("k%d", k)]++
			}
		}
		if code, _, errOut := runCLIIn(rows.String(), "queue", "write", "--data", dir, "events"); code != 0 {
			t.Fatalf("queue write: exit %d: %s", code, errOut)
		}
	}
	status := func() (map[string]any, string) {
		code, out, errOut := runCLI("pipeline", "status", "--data", dir)
		var s map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
			return nil, fmt.Sprintf("exit %d: %s%s", code, out, errOut)
		}
		return s, out
	}
	write(20) // in flight, or not even read yet, when the rescale begins

	code, out, errOut := runCLI("pipeline", "rescale", "Counter", "2", "--data", dir)
	if code != 0 || !strings.Contains(out, `"recorded": true`) || !strings.Contains(out, "Counter to 2 partitions") {
		t.Fatalf("pipeline rescale Counter 2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	eventually(t, 15*time.Second, "the rescale of Counter is not reported done", func() (bool, string) {
		s, raw := status()
		r, _ := s["rescales"].(map[string]any)
		d, _ := r["done"].([]any)
		if len(d) != 1 {
			return false, raw
		}
		rep, _ := d[0].(map[string]any)
		return rep["computation"] == "Counter" && rep["from"] == float64(4) && rep["to"] == float64(2) && rep["pause_ms"] != nil, raw
	})
	s, raw := status()
	n := 0
	for _, p := range s["partitions"].([]any) {
		if strings.HasPrefix(p.(map[string]any)["Partition"].(string), "Counter/") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("after the rescale, %d partitions of Counter; want 2: %s", n, raw)
	}
	write(20)

	// Bad arguments: N is checked before anything is sent.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"Counter", "0"}, 2, "N is 0: want a partition count from 1 to 4096"},
		{[]string{"Counter", "-3"}, 2, "N is -3: want a partition count from 1 to 4096"},
		{[]string{"Counter", "4097"}, 2, "N is 4097: want a partition count from 1 to 4096"},
		{[]string{"Counter", "two"}, 2, `N is "two", not an integer`},
		{[]string{"Counter"}, 2, "want two arguments, COMPUTATION and N"},
		{[]string{"Reader", "3"}, 1, `"Reader" cannot be rescaled: computation Reader reads a source`},
		{[]string{"Nope", "3"}, 1, `the pipeline has no computation "Nope"`},
	} {
		code, out, errOut := runCLI(append([]string{"pipeline", "rescale", "--data", dir}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("pipeline rescale %v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	// Bad bodies: a 400 naming the field.
	ac, ok := runningAdmin(dir)
	if !ok {
		t.Fatal("admin API gone")
	}
	for body, want := range map[string]string{
		`{"computation": "Counter", "parts": 2}`:        `unknown field "parts"`,
		`{"computation": "Counter", "partitions": "2"}`: `field "partitions": a JSON string; want an integer`,
		`{"computation": 7, "partitions": 2}`:           `field "computation": a JSON number; want a string`,
		`{"computation": "Counter"}`:                    `field "partitions": missing`,
		`{"partitions": 2}`:                             `field "computation": missing`,
		`{"computation": "Counter", "partitions": 0}`:   `field "partitions" is 0`,
	} {
		req, err := ac.request(http.MethodPost, "/pipeline/rescale", "", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("POST /pipeline/rescale %s: %d %q; want 400 and %q", body, resp.StatusCode, b, want)
		}
	}

	// Exactly once across the rescale: each key's counts are 1..n once.
	total := 0
	for _, n := range written {
		total += n
	}
	var rows []string
	eventually(t, 15*time.Second, fmt.Sprintf("the counts queue does not hold %d rows", total), func() (bool, string) {
		code, out, errOut := runCLI("queue", "read", "--data", dir, "counts")
		if code != 0 {
			return false, errOut
		}
		rows = strings.Split(strings.TrimSpace(out), "\n")
		_, raw := status()
		return len(rows) >= total, fmt.Sprintf("%d rows: %s\nstatus: %s\nlog: %s", len(rows), out, raw, runErr.String())
	})
	seen := map[string]map[int64]bool{}
	sc := bufio.NewScanner(strings.NewReader(strings.Join(rows, "\n")))
	for sc.Scan() {
		var r struct {
			Key   string
			Count int64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("counts row %q: %v", sc.Text(), err)
		}
		if seen[r.Key] == nil {
			seen[r.Key] = map[int64]bool{}
		}
		if seen[r.Key][r.Count] {
			t.Errorf("key %s: count %d emitted twice", r.Key, r.Count)
		}
		seen[r.Key][r.Count] = true
	}
	for k, n := range written {
		for i := int64(1); i <= int64(n); i++ {
			if !seen[k][i] {
				t.Errorf("key %s: count %d missing", k, i)
			}
		}
		if len(seen[k]) != n {
			t.Errorf("key %s: %d counts, want %d", k, len(seen[k]), n)
		}
	}

	if code, out, errOut := runCLI("pipeline", "stop", "--data", dir); code != 0 {
		t.Fatalf("pipeline stop: exit %d, %q %q", code, out, errOut)
	}
	select {
	case code := <-done:
		stopped = true
		if code != 0 {
			t.Fatalf("weir run exited %d: %s", code, runErr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("weir run did not stop: %s", runErr.String())
	}
}

// TestClusterAdminRescale: weir controller's POST /pipeline/rescale — a
// standby refuses it (421), the active controller records the target in
// the layout record and lists no rescale done yet in /status; a body sent
// as text/plain (what a cross-site page can send) is refused.
func TestClusterAdminRescale(t *testing.T) {
	st, sp := counterFixture(t, pstore.Options{})
	ctx := context.Background()
	for _, q := range []string{"events", "counts"} {
		if _, err := queue.Create(ctx, st, q, 1); err != nil {
			t.Fatal(err)
		}
	}
	const token = "s3cret-s3cret-s3cret"
	a := newClusterAdmin(wire.Security{Token: token}, st, sp)
	post := func(contentType, body string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/pipeline/rescale", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec
	}
	body := `{"computation": "Counter", "partitions": 8}`
	if rec := post("application/json", body); rec.Code != http.StatusMisdirectedRequest || !strings.Contains(rec.Body.String(), "standby") {
		t.Fatalf("rescale on a standby: %d %s", rec.Code, rec.Body)
	}
	act := testActive(t, st, sp, "c1")
	a.set(act)
	if rec := post("text/plain", body); rec.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("rescale sent as text/plain: %d %s", rec.Code, rec.Body)
	}
	if rec := post("application/json", `{"computation": "Counter", "partitions": 8, "x": 1}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `unknown field "x"`) {
		t.Fatalf("rescale with an unknown field: %d %s", rec.Code, rec.Body)
	}
	rec := post("application/json", body)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"recorded": true`) {
		t.Fatalf("rescale on the active controller: %d %s", rec.Code, rec.Body)
	}
	lr, ok, err := controller.LoadLayout(ctx, st)
	if err != nil || !ok || lr.Targets["Counter"] != 8 {
		t.Fatalf("layout record after the rescale: %+v (stored %v, %v); want the target Counter 8", lr, ok, err)
	}
	s := a.status(ctx, act)
	if r, ok := s["rescales"].(rescalesJSON); !ok || len(r.Done) != 0 {
		t.Fatalf("status rescales: %#v", s["rescales"])
	}
}
