package remote

import (
	"testing"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/transport"
)

// TestFenceBelow: a node refuses the lives of a sending partition below
// the lease FenceBelow named — though its routes (a heartbeat behind) still
// call the old life current — and admits the named life and newer ones.
func TestFenceBelow(t *testing.T) {
	n := NewNode(Config{Worker: "w"})
	defer n.Close()
	to, from := transport.PartitionID("Counter/0"), transport.PartitionID("Relay/0")
	n.SetRoutes([]Route{{Partition: from, Lease: 5, Worker: "w2"}})
	n.JobStarted(to, 9)
	admitted := func(lease store.LeaseID) byte {
		_, code, _ := n.admit(from, lease, to, 9, true)
		return code
	}
	if c := admitted(5); c != replyAck {
		t.Fatalf("the routed life before any fence: reply %d, want ack", c)
	}
	n.FenceBelow(from, 7) // Relay/0's new life, started with a rescale
	if c := admitted(5); c != replyFenced {
		t.Fatalf("a life below the fence: reply %d, want fenced", c)
	}
	if c := admitted(7); c != replyAck {
		t.Fatalf("the fencing life: reply %d, want ack", c)
	}
	n.FenceBelow(from, 6) // fences only rise
	if c := admitted(6); c != replyFenced {
		t.Fatalf("a lower fence after a higher one: reply %d, want fenced", c)
	}
}
