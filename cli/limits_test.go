package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/weir-stream/weir/connector/queue"
)

// TestNegativeLimitRefused: a negative limit — from the command line or
// the admin API's ?limit= — is an error, not "every row" (queue) or a
// store error (table).
func TestNegativeLimitRefused(t *testing.T) {
	st, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	q, err := queue.Create(ctx, st, "q", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readRows(ctx, q, io.Discard, -1, 0, -5); err == nil || !strings.Contains(err.Error(), "limit -5: want 0 (all rows) or a positive count") {
		t.Errorf("readRows limit -5: %v", err)
	}
	if err := readTable(ctx, st, io.Discard, "t", "", "", -1); err == nil || !strings.Contains(err.Error(), "limit -1: want 0 (all rows) or a positive count") {
		t.Errorf("readTable limit -1: %v", err)
	}
}
