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

// RedundantFrontiers returns the frontiers of fs that belong to no range of
// current (the computation's layout) and that the current layout's own
// frontiers make useless: for the same channel (stream, sender, origin),
// every current range overlapping the row's has a frontier of its own at
// or above the row's id. A message the row covers then has a key in one of
// those ranges and an id at or below that range's own frontier, which
// drops it first (job/dedup.go: filter) — the row can be deleted. A
// current range with no frontier of its own for the channel keeps the row:
// a re-sent message only the row covers would be processed twice without
// it. Own frontiers only grow, so a row found redundant stays so.
func RedundantFrontiers(fs []Frontier, current []FrontierRange) []Frontier {
	type channel struct{ stream, sender, origin string }
	own := map[channel]map[FrontierRange]msgid.ID{}
	isCurrent := map[FrontierRange]bool{}
	for _, r := range current {
		isCurrent[r] = true
	}
	for _, f := range fs {
		if isCurrent[f.Range] {
			ch := channel{f.Stream, f.Sender, f.Origin}
			if own[ch] == nil {
				own[ch] = map[FrontierRange]msgid.ID{}
			}
			own[ch][f.Range] = f.ID
		}
	}
	var out []Frontier
	for _, f := range fs {
		if isCurrent[f.Range] {
			continue
		}
		mine := own[channel{f.Stream, f.Sender, f.Origin}]
		covered := true
		for _, r := range current {
			if !r.Overlaps(f.Range) {
				continue
			}
			if id, ok := mine[r]; !ok || id < f.ID {
				covered = false
				break
			}
		}
		if covered {
			out = append(out, f)
		}
	}
	return out
}
