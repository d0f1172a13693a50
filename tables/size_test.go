package tables

import (
	"testing"

	"github.com/weir-stream/weir"
)

// TestSizeOr: a known size is taken as it is; an unknown one (0) is the
// estimate, MessageSize.
func TestSizeOr(t *testing.T) {
	m := &weir.Message{ID: "a", Stream: "s", Payload: weir.Row{"key": "k"}}
	if n := SizeOr(123, m); n != 123 {
		t.Fatalf("SizeOr(123) = %d, want the known 123", n)
	}
	if n, want := SizeOr(0, m), MessageSize(m); n != want {
		t.Fatalf("SizeOr(0) = %d, want the estimate %d", n, want)
	}
}
