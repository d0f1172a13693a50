package main

// External state and the service log through the real binary: the
// external-state example under SIGKILLs (the counts queue and the table
// key_counts, read with 'weir table read', exact), and the service-log
// example cycling over key_counts while rows are added and deleted and
// the process is SIGKILLed and restarted (each key once per cycle).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/connector/servicelog/servicelogtest"
)

// readTableCounts reads key_counts through 'weir table read'.
func readTableCounts(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(weir(t, "", "table", "read", "--data", dir, "key_counts")))
	for sc.Scan() {
		var row struct {
			Hash  *uint64 `json:"key_hash"`
			Key   string  `json:"key"`
			Count int64   `json:"count"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Hash == nil {
			t.Fatalf("table read line %q: %v (want key_hash, key, count)", sc.Text(), err)
		}
		got[row.Key] = row.Count
	}
	return got
}

// TestExternalStateKillAndRerun: the external-state example, SIGKILLed at
// random moments and rerun until it completes: the counts emitted are
// exactly 1..n per key, and the table holds exactly n per key.
func TestExternalStateKillAndRerun(t *testing.T) {
	dir, want := setup(t, 20000, 200, 21)
	kills := runKilled(t, dir, exampleSpec("external-state"), 21, 6)
	t.Logf("%d SIGKILLs before completion", kills)
	checkExact(t, readCounts(t, dir), want)
	got := readTableCounts(t, dir)
	for k, n := range want {
		if got[k] != int64(n) {
			t.Errorf("key_counts[%s] = %d, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("key_counts has %d rows, want %d", len(got), len(want))
	}
	// A range read: the rows whose first key column is in the lower half.
	half := weir(t, "", "table", "read", "--data", dir, "--to", "[9223372036854775808]", "key_counts")
	if n := strings.Count(half, "\n"); n == 0 || n >= len(want) {
		t.Errorf("a range read of half the key space returned %d of %d rows", n, len(want))
	}
	bad := exec.Command(weirBin, "table", "read", "--data", dir, "key_count")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), `no external state table "key_count" in this store (declared: [key_counts])`) {
		t.Errorf("table read of an unknown table: %v, %s", err, out)
	}
	bad = exec.Command(weirBin, "table", "read", "--data", dir, "--from", `["x"]`, "key_counts")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "--from: external state key_counts: key column key_hash") {
		t.Errorf("table read with a bad key: %v, %s", err, out)
	}
	if out := weir(t, "", "table", "list", "--data", dir); !strings.Contains(out, fmt.Sprintf("key_counts\tkey (key_hash uint64, key string)\tvalues (count int64)\t%d rows", len(want))) {
		t.Errorf("table list said %q", out)
	}
}

// writeKeyEvents writes one event per key (op "delete" deletes its row).
func writeKeyEvents(t *testing.T, dir string, keys []string, op string) {
	t.Helper()
	var in strings.Builder
	for _, k := range keys {
		if op == "" {
			fmt.Fprintf(&in, `{"key": %q}`+"\n", k)
		} else {
			fmt.Fprintf(&in, `{"key": %q, "op": %q}`+"\n", k, op)
		}
	}
	weir(t, in.String(), "queue", "write", "--data", dir, "events")
}

// checkMetrics polls the running weir's /metrics until it has every
// series (the counters appear with the first row they count), within 30s.
func checkMetrics(t *testing.T, dir string, series ...string) {
	t.Helper()
	addr, _ := adminFile(t, dir)
	token := adminTokenOf(t, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token) // /metrics is pipeline data too
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, s := range series {
			if !strings.Contains(string(b), s+" ") {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %v", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readDigests(t *testing.T, dir string) []servicelogtest.Digest {
	t.Helper()
	var out []servicelogtest.Digest
	sc := bufio.NewScanner(strings.NewReader(weir(t, "", "queue", "read", "--data", dir, "digests")))
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("digests line %q: %v", sc.Text(), err)
		}
		for k, v := range raw {
			if n, ok := v.(json.Number); ok {
				i, _ := n.Int64()
				raw[k] = i
			}
		}
		d, err := servicelogtest.FromRow(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestServiceLogKillsDuringCycles: key_counts is filled by the
// external-state example; then the service-log example (without its pause
// between cycles) runs, is SIGKILLed at random moments in the middle of
// cycles and restarted, while new keys are added and others deleted
// through the admin API. At the end a SIGTERM drains it. The oracle: in
// every cycle each key at most once, in every completed cycle each key
// that stayed in the table exactly once, and the cycle-end digests count
// the cycle's rows.
func TestServiceLogKillsDuringCycles(t *testing.T) {
	dir := t.TempDir()
	for _, q := range []string{"events", "counts", "digests"} {
		weir(t, "", "queue", "create", "--data", dir, "--partitions", "2", q)
	}
	var stable, doomed []string
	for i := 0; i < 150; i++ {
		stable = append(stable, fmt.Sprintf("s%03d", i))
	}
	for i := 0; i < 60; i++ {
		doomed = append(doomed, fmt.Sprintf("d%03d", i))
	}
	writeKeyEvents(t, dir, append(append([]string{}, stable...), doomed...), "")
	weir(t, "", "run", "--data", dir, "--spec", exampleSpec("external-state"), "--progress", "0")

	b, err := os.ReadFile(exampleSpec("service-log"))
	if err != nil {
		t.Fatal(err)
	}
	// Test-sized: no pause between cycles, small batches (several epochs
	// per cycle, so kills land inside cycles).
	text := strings.Replace(string(b), `"min_cycle_duration" = "2s";`, `"min_cycle_duration" = "20ms";`, 1)
	text = strings.Replace(text, `"computation_class_name" = "Digest";`, `"computation_class_name" = "Digest"; "max_rows_per_batch" = 16;`, 1)
	if strings.Count(text, "20ms")+strings.Count(text, `"max_rows_per_batch" = 16`) != 2 {
		t.Fatal("the service-log example changed: the test's edits no longer apply")
	}
	spec := filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	volatile := map[string]bool{}
	for _, k := range doomed {
		volatile[k] = true
	}
	r := rand.New(rand.NewPCG(15, 15))
	added, kills := 0, 0
	for round := 0; round < 6; round++ {
		run := startRun(t, dir, spec)
		// Rows added and deleted while the cycles run.
		var fresh []string
		for i := 0; i < 12; i++ {
			k := fmt.Sprintf("n%03d", added)
			added++
			volatile[k] = true
			fresh = append(fresh, k)
		}
		writeKeyEvents(t, dir, fresh, "")
		var del []string
		for i := 0; i < 6; i++ {
			del = append(del, doomed[r.IntN(len(doomed))])
		}
		writeKeyEvents(t, dir, del, "delete")
		// The table is readable through the admin API meanwhile.
		if out := weir(t, "", "table", "read", "--data", dir, "--limit", "3", "key_counts"); strings.Count(out, "\n") != 3 {
			t.Fatalf("table read through the admin API returned %q", out)
		}
		time.Sleep(time.Duration(200+r.IntN(600)) * time.Millisecond)
		if round == 0 {
			checkMetrics(t, dir, `weir_service_log_rows_total{partition="key_counts#0/2",source="log"}`,
				`weir_service_log_cycles_total{partition="key_counts#1/2",source="log"}`,
				`weir_external_state_writes_total{kind="put",table="key_counts"}`,
				`weir_external_state_writes_total{kind="delete",table="key_counts"}`)
		}
		run.cmd.Process.Signal(syscall.SIGKILL)
		<-run.done
		run.done <- nil
		kills++
	}
	run := startRun(t, dir, spec)
	time.Sleep(500 * time.Millisecond)
	run.cmd.Process.Signal(syscall.SIGTERM)
	if err := run.wait(t); err != nil {
		t.Fatalf("weir run after SIGTERM: %v\n%s", err, tail(run.stderr.String()))
	}
	res := servicelogtest.Check(readDigests(t, dir), 2, stable, volatile)
	for _, b := range res.Bad {
		t.Error(b)
	}
	for p := 0; p < 2; p++ {
		if res.Completed[p] < 3 {
			t.Errorf("partition %d completed %d cycles; the test wants at least 3 to prove anything", p, res.Completed[p])
		}
	}
	t.Logf("%d SIGKILLs; completed cycles per partition %v", kills, res.Completed)
}
