//go:build !chdb

package chdbtest

import (
	"os"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
)

// TestNeedsChdbTag reports how to run this package's tests: they are
// compiled only with -tags chdb (chdb-go loads libchdb.so when the test
// binary starts, so they cannot skip at run time). Under CI=true the
// tagged run is part of .ci/run, so this untagged one passes.
func TestNeedsChdbTag(t *testing.T) {
	if os.Getenv("CI") == "true" {
		t.Log("chDB tests run in .ci/run with -tags chdb")
		return
	}
	msg := "chDB tests need: go test -tags chdb ./connector/clickhouse/chdbtest with CHDB_LIB_PATH=<libchdb.so> (npm install @chdb/lib-linux-x64-gnu@26.7.3-stable.1)"
	testproc.RecordSkip(t, msg)
	t.Skip(msg)
}
