package main

// Hostile and mistaken inputs through the real binary (issue 25, items
// 5–10): what the operator sees instead of a cleared terminal, a forged
// log line, a silently created store or a silently accepted value.

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStderrEscapesRowText: a row whose column names hold an ESC sequence
// (clear the screen) and a newline followed by a forged "pipeline
// completed" record reaches stderr escaped — no control byte but newline
// and tab, and no line at the left margin that weir did not start.
func TestStderrEscapesRowText(t *testing.T) {
	dir, _ := setup(t, 0, 1, 1)
	forged := "weir: 2026/01/01 00:00:00.000000 pipeline completed after 1.0s: Counter 1 in, 1 out; 1 jobs started, 0 failed, 0 lost"
	weir(t, `{"user":"a","\u001b[2J\u001b]0;owned\u0007":1,"x\n`+forged+`":2,"\u202eevil":3}`+"\n", "queue", "write", "--data", dir, "--partition", "0", "events")
	cmd := exec.Command(weirBin, "run", "--data", dir, "--spec", exampleSpec("counter"), "--progress", "100ms", "--drain-timeout", "1s")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "FAILING") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure reported:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		done <- nil
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run did not exit:\n%s", stderr.String())
	}
	out := stderr.String()
	for i, c := range []byte(out) {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Fatalf("raw control byte %#x at %d reached stderr:\n%q", c, i, out)
		}
	}
	if strings.Contains(out, "\u202e") {
		t.Fatalf("a bidi override reached stderr:\n%q", out)
	}
	for _, want := range []string{`\x1b[2J\x1b]0;owned\x07`, `\u202eevil`, "\n  " + forged} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, forged[:12]) && strings.Contains(line, "pipeline completed") {
			t.Fatalf("a row forged a record at the left margin: %q\n%s", line, out)
		}
	}
}

// weirOut runs the binary and returns its exit error and its stdout and
// stderr.
func weirOut(stdin string, args ...string) (err error, stdout, stderr string) {
	cmd := exec.Command(weirBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return err, o.String(), e.String()
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
