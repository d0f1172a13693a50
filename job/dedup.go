package job

import (
	"context"
	"fmt"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// inputStore is a computation partition's view of which inputs were already
// processed (Flow's TInputStore.Filter). An input is processed if its
// SystemTimestamp is below the input stream's SystemWatermark — the
// controller garbage-collects dedup rows below the watermark, and the
// watermark test stands in for them — or, in exactly_once mode:
//
//   - on an ordered channel (transport.Delivery: a sender that offers each
//     receiving partition strictly increasing ids per stream within each of
//     its lives, every life starting at ids its predecessors had delivered
//     and had acknowledged), if its id is at or below a frontier covering
//     it: the highest id a partition of this computation processed from
//     that sender on that stream, for the partition's key-hash range. Such a
//     partition processes what it fetches in arrival order, which is offer
//     order, so what it processed from the channel is every id up to the
//     frontier that the sender sends into that range (the ids below the
//     replay start of the life that sent the frontier were acknowledged,
//     hence processed). The frontier is one flow_state row per (stream,
//     sender, range), written in the epoch's transaction when it moves:
//     O(channels) writes per epoch, no row per message, no lookup. Rows of
//     other ranges are those of an earlier partition layout (a static
//     change of partition_count): a message whose key hash they cover is
//     processed if its id is at or below theirs, since a stopped pipeline
//     may still replay what it had read.
//   - on an ordered sub-channel (a Swift sender whose ids are inherited from
//     inputs of several ordered upstreams offers each origin's ids in
//     increasing order: transport.Offer.Origin), the same per (sender,
//     origin): the frontier row's sender is tables.ChannelSender(sender,
//     origin).
//   - otherwise (merged ids, a Swift sender whose inputs came unordered, an
//     unfenced offer), if its id has a row in the
//     dedup table (input_messages or compact_input_messages), written with
//     the epoch that processed it. An ordered channel that has no frontier
//     of this partition yet (its first messages, or data written by a
//     version without frontiers) is looked up there too, until its first
//     fresh message starts its frontier.
//
// In at_least_once_consistent mode (checkState false) only the watermark
// test runs: no reads, no writes.
type inputStore struct {
	st         store.Store
	comp       string
	compact    bool
	checkState bool
	// own is the key-hash range of this partition.
	own tables.FrontierRange
	// watermarks holds the SystemWatermark of each input stream, as last
	// published by the controller. It only grows.
	watermarks map[string]store.Timestamp
	// frontier holds this partition's frontier per ordered channel:
	// committed, or decided by the current epoch (a job whose epoch fails
	// is discarded with its memory). It only grows.
	frontier map[channel]msgid.ID
	// earlier holds the committed frontiers of other ranges (earlier
	// partition layouts), per channel.
	earlier map[channel][]rangeFrontier
	// moved lists the channels whose frontier this epoch moved; rows lists
	// this epoch's fresh inputs that need a dedup row. Both are written by
	// register.
	moved []channel
	rows  []*weir.Message
	seen  map[msgid.ID]bool
	// why counts the last filter's processed inputs by reason.
	why dropReasons
}

// dropReasons counts an epoch's processed inputs by what found them
// processed (for traces and protocol scripts).
type dropReasons struct {
	watermark, frontier, earlier, idRow, repeat int
}

func (r dropReasons) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{r.watermark, "watermark"}, {r.frontier, "frontier"}, {r.earlier, "earlier layout's frontier"}, {r.idRow, "id row"}, {r.repeat, "repeated in batch"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", p.name, p.n))
		}
	}
	return strings.Join(parts, ", ")
}

// channel is one sending partition's stream into this computation, or one
// origin's part of it (transport.Offer.Origin).
type channel struct {
	stream string
	from   transport.PartitionID
	origin transport.PartitionID
}

// rangeFrontier is a frontier of another key range.
type rangeFrontier struct {
	r  tables.FrontierRange
	id msgid.ID
}

// origin is where an input came from: its sender, the sender's origin of
// it (transport.Delivery.Origin), and whether that (sub-)channel is
// ordered (index-aligned with an epoch's fetched inputs).
type origin struct {
	from    transport.PartitionID
	via     transport.PartitionID
	ordered bool
}

func newInputStore(st store.Store, comp string, own tables.FrontierRange, compact, checkState bool) *inputStore {
	return &inputStore{st: st, comp: comp, own: own, compact: compact, checkState: checkState,
		watermarks: map[string]store.Timestamp{}, frontier: map[channel]msgid.ID{},
		earlier: map[channel][]rangeFrontier{}, seen: map[msgid.ID]bool{}}
}

// advance raises stream's SystemWatermark to wm (never lowers it).
func (s *inputStore) advance(stream string, wm store.Timestamp) {
	if wm > s.watermarks[stream] {
		s.watermarks[stream] = wm
	}
}

// filter splits msgs into fresh ones and ones already processed; origins is
// index-aligned with msgs (nil: no channel is ordered). Duplicate ids within
// msgs count as processed after their first occurrence. On a channel
// without a frontier only suspect messages (those that may have been
// delivered before, see transport.Delivery) are looked up in the dedup
// table: a message delivered for the first time cannot be in it.
func (s *inputStore) filter(ctx context.Context, msgs []*weir.Message, origins []origin, suspect map[msgid.ID]bool) (fresh, processed []*weir.Message, err error) {
	clear(s.seen)
	s.moved, s.rows = s.moved[:0], s.rows[:0]
	s.why = dropReasons{}
	fresh = make([]*weir.Message, 0, len(msgs))
	for i, m := range msgs {
		if m.SystemTimestamp < s.watermarks[m.Stream] {
			s.why.watermark++
			processed = append(processed, m)
			continue
		}
		var ch channel
		ordered := s.checkState && i < len(origins) && origins[i].ordered && origins[i].from != ""
		if ordered {
			ch = channel{m.Stream, origins[i].from, origins[i].via}
			if s.coveredEarlier(ch, m) {
				s.why.earlier++
				processed = append(processed, m)
				continue
			}
			if f, ok := s.frontier[ch]; ok {
				if m.ID <= f {
					s.why.frontier++
					processed = append(processed, m)
					continue
				}
				s.advanceFrontier(ch, m.ID)
				fresh = append(fresh, m)
				continue
			}
		}
		if s.seen[m.ID] {
			s.why.repeat++
			processed = append(processed, m)
			continue
		}
		s.seen[m.ID] = true
		if s.checkState && suspect[m.ID] {
			_, ok, err := s.st.Get(ctx, tables.DedupTable(s.compact), tables.DedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID))
			if err != nil {
				return nil, nil, fmt.Errorf("dedup lookup of %s: %w", m.ID, err)
			}
			if ok {
				s.why.idRow++
				processed = append(processed, m)
				continue
			}
		}
		if ordered {
			s.advanceFrontier(ch, m.ID) // the channel's frontier starts here
		} else if s.checkState {
			s.rows = append(s.rows, m)
		}
		fresh = append(fresh, m)
	}
	return fresh, processed, nil
}

// coveredEarlier reports whether a frontier of an earlier layout covers m.
func (s *inputStore) coveredEarlier(ch channel, m *weir.Message) bool {
	for _, f := range s.earlier[ch] {
		if f.r.Contains(m.Key.Hash) && m.ID <= f.id {
			return true
		}
	}
	return false
}

// advanceFrontier moves ch's frontier to id (above it) in memory.
func (s *inputStore) advanceFrontier(ch channel, id msgid.ID) {
	if !s.isMoved(ch) {
		s.moved = append(s.moved, ch)
	}
	s.frontier[ch] = id
}

func (s *inputStore) isMoved(ch channel) bool {
	for _, c := range s.moved {
		if c == ch {
			return true
		}
	}
	return false
}

// register adds to txn what the last filter decided to remember
// (exactly_once only): the dedup rows of fresh inputs from unordered
// channels, and the moved frontiers.
func (s *inputStore) register(txn *store.Txn) {
	if !s.checkState {
		return
	}
	t := tables.DedupTable(s.compact)
	for _, m := range s.rows {
		txn.Put(t, tables.DedupKey(s.compact, s.comp, m.Stream, m.SystemTimestamp, m.ID), nil)
	}
	for _, ch := range s.moved {
		txn.Put(store.FlowState, tables.FrontierKey(s.comp, ch.stream, tables.ChannelSender(string(ch.from), string(ch.origin)), s.own), []byte(s.frontier[ch]))
	}
	clear(s.rows)
	s.rows, s.moved = s.rows[:0], s.moved[:0]
}

// loadFloors raises the watermarks to the persisted dedup floors.
func (s *inputStore) loadFloors(ctx context.Context, streams []string) error {
	for _, stream := range streams {
		w, err := tables.DedupFloor(ctx, s.st, s.comp, stream)
		if err != nil {
			return fmt.Errorf("read dedup floor of %s/%s: %w", s.comp, stream, err)
		}
		s.advance(stream, w)
	}
	return nil
}

// loadFrontiers reads the computation's committed frontiers: this
// partition's range, and other ranges (earlier layouts). It runs after the
// job's first commit proved its lease: no earlier job of the partition can
// commit after it.
func (s *inputStore) loadFrontiers(ctx context.Context) error {
	if !s.checkState {
		return nil
	}
	fs, err := tables.Frontiers(ctx, s.st, s.comp)
	if err != nil {
		return err
	}
	for _, f := range fs {
		ch := channel{f.Stream, transport.PartitionID(f.Sender), transport.PartitionID(f.Origin)}
		if f.Range == s.own {
			s.frontier[ch] = f.ID
		} else {
			s.earlier[ch] = append(s.earlier[ch], rangeFrontier{f.Range, f.ID})
		}
	}
	return nil
}
