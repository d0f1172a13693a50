package main

// The command's manners: help on stdout, progress without carriage
// returns when stderr is not a terminal, the word count demo completes.

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpOnStdout: asking for help prints it on stdout with exit 0 and
// nothing on stderr; a usage error prints on stderr with exit 2.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"run", "-h"}, {"demo", "--help"}, {"queue", "--help"},
		{"queue", "write", "--help"}, {"queue", "read", "--data", "x", "-help"}, {"pipeline", "--help"}, {"store", "--help"}, {"store", "check", "--help"}} {
		cmd := exec.Command(weirBin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "Usage") || stderr.Len() != 0 {
			t.Errorf("weir %v: %v\nstdout: %q\nstderr: %q", args, err, stdout.String(), stderr.String())
		}
	}
	cmd := exec.Command(weirBin, "run", "--bogus")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "Usage") {
		t.Errorf("weir run --bogus: %v\nstdout: %q\nstderr: %q", err, stdout.String(), stderr.String())
	}
}

// TestDemoWordcount: the word count demo feeds lines of words (not page
// views, which Tokenize rejects), completes and verifies every word's
// counts; its progress is plain lines when stderr is not a terminal.
func TestDemoWordcount(t *testing.T) {
	cmd := exec.Command(weirBin, "demo", "--example", "wordcount", "--events", "3000", "--keys", "40", "--seed", "2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir demo --example wordcount: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "verified:") || !strings.Contains(stdout.String(), "duplicates:  0") {
		t.Fatalf("summary:\n%s", stdout.String())
	}
	if strings.Contains(stderr.String(), "\r") {
		t.Fatalf("carriage returns in progress written to a pipe: %q", stderr.String())
	}
}
