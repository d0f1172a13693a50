package tables

import (
	"context"
	"fmt"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Frontier is one dedup frontier row of a computation (job/dedup.go): the
// highest id a partition of key range Range processed from Sender (and,
// for a sub-channel, Origin: ChannelSender) on Stream.
type Frontier struct {
	Stream, Sender, Origin string
	Range                  FrontierRange
	ID                     msgid.ID
}

// Frontiers reads every dedup frontier of computation comp, in key order.
// A malformed row is an error naming it.
func Frontiers(ctx context.Context, st store.Store, comp string) ([]Frontier, error) {
	p := FrontierPrefix(comp)
	var out []Frontier
	var bad error
	err := st.Scan(ctx, store.Range{Table: store.FlowState, Lo: p, Hi: PrefixEnd(p)}, func(k, v []byte) bool {
		stream, from, r, ok := ParseFrontierKey(comp, k)
		if !ok || len(v) == 0 {
			bad = fmt.Errorf("dedup frontier of %s: malformed row %q", comp, k)
			return false
		}
		sender, origin := SplitChannelSender(from)
		out = append(out, Frontier{Stream: stream, Sender: sender, Origin: origin, Range: r, ID: msgid.ID(v)})
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, fmt.Errorf("read dedup frontiers of %s: %w", comp, err)
	}
	return out, nil
}
