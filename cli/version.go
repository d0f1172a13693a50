package cli

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/store/postgres"
)

// Version is the weir version.
var Version = "0.1.0-dev"

// release names this build: the version and, when the binary was built
// from a git checkout, its commit (a "+" for uncommitted changes). Workers
// register it, so that an operator sees which build each one runs during
// a rolling upgrade.
func release() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return Version
	}
	if dirty {
		rev += "+"
	}
	return Version + " " + rev
}

// printVersion is weir version: the build, and the versions that decide
// what it interoperates with during an upgrade in place.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "weir %s\n", release())
	fmt.Fprintf(w, "control protocol %d (interoperates with %d to %d)\n", cluster.ProtocolVersion, max(1, cluster.ProtocolVersion-1), cluster.ProtocolVersion+1)
	fmt.Fprintf(w, "PostgreSQL store schema %d\n", postgres.SchemaVersion)
}
