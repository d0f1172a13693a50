package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weir-stream/weir/store/postgres"
	"github.com/weir-stream/weir/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, Options{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// TestStoreInit: 'weir store init' creates the schema named by the URL,
// says so, and is idempotent; the store then opens. Usage errors exit 2,
// an unreachable server 1 with the driver's error.
func TestStoreInit(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	target := pgtest.WithParam(url, postgres.SchemaParam, schema)
	for i, want := range []string{"applied migrations [1 2 3], now at version 3", "up to date (version 3)"} {
		code, out, errOut := runCLI("store", "init", "--store", target)
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, schema) {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want %q", i+1, code, out, errOut, want)
		}
	}
	s, err := postgres.Open(t.Context(), target, postgres.Options{})
	if err != nil {
		t.Fatalf("open after weir store init: %v", err)
	}
	s.Close()

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"store", "init"}, 2, "need --store"},
		{[]string{"store", "init", "--store", t.TempDir()}, 2, "must be a postgres://"},
		{[]string{"store", "init", "--store", "postgres://nobody@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"}, 1, "connect"},
		{[]string{"store", "init", "--help"}, 0, "Idempotent"},
		{[]string{"store", "--help"}, 0, "weir store init --store"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("weir %v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}
