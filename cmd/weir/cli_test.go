package main

// The command's manners: help on stdout, progress without carriage
// returns when stderr is not a terminal, the word count demo completes.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// TestReadmeGoSnippetBuilds: README's "your own computations" program is
// complete (package, imports) and builds as a module that requires weir.
func TestReadmeGoSnippetBuilds(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no Go snippet")
	}
	mod := t.TempDir()
	sum, _ := os.ReadFile(filepath.Join(root, "go.sum"))
	// The user's go.mod as `go mod tidy` writes it: weir plus weir's own
	// requirements (direct and indirect). Without them the go command would
	// load the whole unpruned graph of older dependencies, whose go.mod files
	// a fresh module cache does not hold (GOPROXY=off).
	weirMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	_, requires, ok3 := strings.Cut(string(weirMod), "\nrequire")
	if !ok3 {
		t.Fatal("go.mod has no require block")
	}
	for name, body := range map[string]string{
		"main.go": snippet,
		"go.mod":  "module example.com/mine\n\ngo 1.26.0\n\nrequire github.com/weir-stream/weir v0.0.0\n\nrequire" + requires + "\nreplace github.com/weir-stream/weir => " + root + "\n",
		"go.sum":  string(sum),
	} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(mod, "mine"), ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README's Go snippet does not build: %v\n%s\n%s", err, out, snippet)
	}
}
