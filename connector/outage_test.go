package connector

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// TestOutage: failures to reach the server count up over the instances of
// one sink in one partition (a restarted job keeps counting), the error
// names the server and the short cause, and a write that succeeds clears
// it and restarts the count.
func TestOutage(t *testing.T) {
	sc := SinkContext{SinkID: "s", PartitionID: "C/0"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	o := NewOutage(sc)
	if o.Err() != nil {
		t.Fatal("a new outage reports an error")
	}
	o.Failed("http://h:1", refused)
	o = NewOutage(sc) // the next life of the job
	o.Failed("http://h:1", refused)
	err := o.Err()
	var re *ReachError
	if !errors.As(err, &re) || re.Attempt != 2 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Err = %v, want a ReachError of attempt 2 wrapping ECONNREFUSED", err)
	}
	if want := "cannot reach http://h:1: dial: connection refused, retrying (attempt 2)"; err.Error() != want {
		t.Errorf("Err = %q, want %q", err, want)
	}
	other := NewOutage(SinkContext{SinkID: "s", PartitionID: "C/1"})
	if e := other.Failed("http://h:1", refused); !strings.HasSuffix(e.Error(), "(attempt 1)") {
		t.Errorf("another partition's count: %v", e)
	}
	o.Recovered()
	if o.Err() != nil {
		t.Error("Recovered left the error")
	}
	if e := o.Failed("http://h:1", refused); !strings.HasSuffix(e.Error(), "(attempt 1)") {
		t.Errorf("the count did not restart after a success: %v", e)
	}
	var none *Outage
	none.Recovered()
	if none.Err() != nil || none.Failed("x", refused) == nil {
		t.Error("a nil outage must record nothing and still describe the failure")
	}
}
