package job

import (
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/transport"
)

// TestCheckOfferOrderPerOrigin: under invariants, a sub-channel's fresh
// offers must increase (one below the last panics) while a maybeDup re-send
// may come below, and each origin is a sub-channel of its own.
func TestCheckOfferOrderPerOrigin(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariants are checked only with -race or -tags invariants")
	}
	j := &Job{} // the zero sender token is unordered
	offer := func(id msgid.ID, origin string, maybeDup bool) (violated bool) {
		defer func() { violated = recover() != nil }()
		j.checkOfferOrder("C/0", pendingOffer{msg: &weir.Message{ID: id, Stream: "s"}, origin: transport.PartitionID("R/" + origin), maybeDup: maybeDup})
		return false
	}
	if offer("b", "0", false) || offer("c", "0", false) || offer("a", "1", false) {
		t.Fatal("increasing offers of each origin were refused")
	}
	if offer("a", "0", true) {
		t.Fatal("a maybeDup re-send below the last offer was refused")
	}
	if !offer("a", "0", false) {
		t.Fatal("a fresh offer below its origin's last went unnoticed")
	}
}
