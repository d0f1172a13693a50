package tables

import "testing"

// TestFrontierKeyWithOrigin: a frontier key of a (sender, origin)
// sub-channel parses back into both, a plain sender's key into the sender
// alone, and a sender field with an empty part or a second origin is
// malformed.
func TestFrontierKeyWithOrigin(t *testing.T) {
	r := FrontierRange{Lo: 1, Hi: 9}
	for _, c := range []struct{ sender, origin string }{{"Hop/0", "Reader@p1"}, {"Reader@p1", ""}} {
		k := FrontierKey("C", "s", ChannelSender(c.sender, c.origin), r)
		stream, from, got, ok := ParseFrontierKey("C", k)
		sender, origin := SplitChannelSender(from)
		if !ok || stream != "s" || sender != c.sender || origin != c.origin || got != r {
			t.Errorf("%q: parsed %v %q %q %q %+v", k, ok, stream, sender, origin, got)
		}
	}
	for _, bad := range []string{"Hop/0\x00", "\x00Reader@p1", "Hop/0\x00a\x00b"} {
		if _, _, _, ok := ParseFrontierKey("C", FrontierKey("C", "s", bad, r)); ok {
			t.Errorf("sender field %q parsed", bad)
		}
	}
}
