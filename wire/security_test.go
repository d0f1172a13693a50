package wire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenBeyondLoopbackNeedsToken: loopback may go without a token;
// any other address is refused without one.
func TestListenBeyondLoopbackNeedsToken(t *testing.T) {
	var none Security
	for _, a := range []string{"127.0.0.1:7000", "localhost:7000", "[::1]:7000"} {
		if err := none.CheckListen(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{"0.0.0.0:7000", "10.0.0.5:7000", ":7000"} {
		if err := none.CheckListen(a); err == nil {
			t.Errorf("%s accepted without a token", a)
		}
		if err := (Security{Token: "t"}).CheckListen(a); err != nil {
			t.Errorf("%s with a token: %v", a, err)
		}
	}
}

// TestTokenFile: a token file others can read is refused; the token is
// trimmed; String never shows it.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte("  s3cret-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToken(p); err == nil || !strings.Contains(err.Error(), "readable by other users") {
		t.Fatalf("world-readable token file: %v", err)
	}
	os.Chmod(p, 0o600)
	tok, err := LoadToken(p)
	if err != nil || tok != "s3cret-value" {
		t.Fatalf("LoadToken = %q, %v", tok, err)
	}
	s := Security{Token: tok}
	if strings.Contains(s.String(), tok) {
		t.Fatalf("String shows the token: %s", s)
	}
	if !s.CheckToken(tok) || s.CheckToken("s3cret") || s.CheckToken("") {
		t.Fatal("CheckToken compares wrongly")
	}
	t.Setenv(TokenEnv, " from-env ")
	if tok, _ := LoadToken(""); tok != "from-env" {
		t.Fatalf("token from the environment = %q", tok)
	}
}
