package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/store/postgres"
)

// TestVersionCommand: weir version names the release and the two versions
// an upgrade in place depends on — the control protocol (with the range it
// interoperates with) and the PostgreSQL store schema.
func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"version"}, Options{Stdout: &out, Stderr: &errb}); code != 0 {
		t.Fatalf("weir version: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"weir " + Version,
		fmt.Sprintf("control protocol %d (interoperates with %d to %d)", cluster.ProtocolVersion, cluster.ProtocolVersion-1, cluster.ProtocolVersion+1),
		fmt.Sprintf("PostgreSQL store schema %d", postgres.SchemaVersion),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("weir version does not say %q:\n%s", want, out.String())
		}
	}
}
