package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestPoisonSkipOnRunningPipeline (issue 25 item 4): a source row that
// fails its partition again and again is named by the failure with its
// source partition and offset and the command that skips it; run while
// the pipeline runs, that command records the skip (through the admin
// API), the partition's next job consumes the row without calling the
// code, and the finite pipeline completes with every other row once.
func TestPoisonSkipOnRunningPipeline(t *testing.T) {
	bin := mustUserBin(t)
	const n = 40
	dir := poisonSetup(t, n)
	p := start(t, bin, nil, "run", "--data", dir, "--spec", sourcePoisonSpec(t, "Refuse"), "--progress", "0")
	hint := regexp.MustCompile(`to skip it: weir pipeline skip (--computation Work --source-partition (\d) --offset (\d+))`)
	poll(t, "the skip hint on stderr", p, func() bool { return hint.MatchString(p.stderr.String()) })
	m := hint.FindStringSubmatch(p.stderr.String())
	args := append([]string{"pipeline", "skip", "--data", dir, "--reason", "bad row"}, strings.Fields(m[1])...)
	out := weir(t, "", args...)
	if !strings.Contains(out, `"Work": source partition "`+m[2]+`" offset `+m[3]+" will be skipped") {
		t.Fatalf("weir pipeline skip said %q", out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("weir run exited %d after the skip, want 0 (completed)\n%s", code, p.stderr.String())
	}
	got := readOut(t, dir)
	for i := 0; i < n; i++ {
		if got[i] != 1 {
			t.Errorf("row %d written %d times, want once", i, got[i])
		}
	}
	// Recorded in the store: a second skip of the same row says so.
	if out := weir(t, "", args...); !strings.Contains(out, "was already skipped") {
		t.Errorf("second skip said %q", out)
	}
}

// TestDeadLetterStream (issue 25 item 4): with dead_letter_stream the
// poison row does not stop its partition: it goes, exactly once, to the
// dead-letter stream's sink with its error and origin, the run completes
// and its summary counts it.
func TestDeadLetterStream(t *testing.T) {
	bin := mustUserBin(t)
	const n = 40
	dir := poisonSetup(t, n)
	weir(t, "", "queue", "create", "--data", dir, "--partitions", "1", "dead")
	spec := writeSpec(t, "dead.yson", `"computations" = {
    "Work" = {"computation_class_name" = "Refuse"; `+eventsSource+` "output_stream_ids" = ["kept"; "dead"];
        "dead_letter_stream" = "dead";
        "sinks" = {"out" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["kept"]; "parameters" = {"queue_path" = "out"}};
                   "dead" = {"sink_class_name" = "SyncQueueSink"; "input_stream_ids" = ["dead"]; "parameters" = {"queue_path" = "dead"}}}};
};
"streams" = {"kept" = {}; "dead" = {}};
`+restartFast)
	p := start(t, bin, nil, "run", "--data", dir, "--spec", spec, "--progress", "0")
	if code := p.wait(t); code != 0 {
		t.Fatalf("weir run exited %d, want 0\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "1 failed and DEAD-LETTERED") {
		t.Errorf("the summary does not count the dead letter:\n%s", p.stderr.String())
	}
	got := readOut(t, dir)
	for i := 0; i < n; i++ {
		if got[i] != 1 {
			t.Errorf("row %d written %d times, want once", i, got[i])
		}
	}
	lines := strings.Split(strings.TrimSpace(weir(t, "", "queue", "read", "--data", dir, "dead")), "\n")
	if len(lines) != 1 {
		t.Fatalf("dead-letter queue holds %d rows, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var dl struct {
		Computation     string         `json:"computation"`
		Error           string         `json:"error"`
		Payload         map[string]any `json:"payload"`
		Source          string         `json:"source"`
		SourcePartition string         `json:"source_partition"`
		Offset          *int64         `json:"offset"`
		MessageID       string         `json:"message_id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &dl); err != nil {
		t.Fatal(err)
	}
	if dl.Computation != "Work" || !strings.Contains(dl.Error, "this row is poison") || dl.Payload["poison"] != true ||
		dl.Source != "events" || dl.SourcePartition == "" || dl.Offset == nil || dl.MessageID == "" {
		t.Errorf("dead letter %s lacks its error or origin", lines[0])
	}
}
