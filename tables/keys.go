// Package tables holds the row layouts of the engine's tables (keys and
// record encodings of states, timers, dedup ids, the outbox, partition
// states and partition_transactions) and the few operations on them that
// more than one package performs: dedup floors and their garbage
// collection. Every key starts with its owner (computation or partition)
// and a 0x00 separator, so one owner's rows form one contiguous range.
package tables

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Row layouts of the engine's tables. Every key starts with the owner
// (computation or partition) and a 0x00 separator, so one owner's rows form
// one contiguous range. Names and ids never contain 0x00.
//
//	states                 comp 0x00 BE64(key hash) keyEncoded 0x00 stateName       → state bytes
//	timers                 comp 0x00 BE64(key hash) keyEncoded 0x00 timerID         → timer record
//	input_messages         comp 0x00 stream 0x00 BE64(system ts) messageID          → (empty)
//	compact_input_messages comp 0x00 stream 0x00 BE64(system ts) hash128(messageID) → (empty)
//	partition_output_messages partition 0x00 messageID                             → output record
//	partition_states       partition 0x00 name                                      → bytes
//	flow_state (frontiers) "dedup_frontier" 0x00 comp 0x00 stream 0x00 sender [0x00 origin] 0x00
//	                       BE64(lo) BE64(hi) toEnd                                  → highest processed id
//	partition_transactions partition                                                → BE64(epoch timestamp)
//
// Dedup rows are ordered by the message's SystemTimestamp (a re-sent message
// carries the same one), so garbage collection below a stream's
// SystemWatermark is one range deletion and a burst of new ids lands in one
// key range instead of all over the table.

func ownerPrefix(owner string) []byte {
	b := make([]byte, 0, len(owner)+1)
	b = append(b, owner...)
	return append(b, 0)
}

func keyedPrefix(comp string, hash uint64) []byte {
	b := ownerPrefix(comp)
	return codec.AppendUint64BE(b, hash)
}

func StateKey(comp string, k weir.Key, name string) []byte {
	return AppendStateKey(make([]byte, 0, len(comp)+1+8+len(k.Encoded)+1+len(name)), comp, k, name)
}

// AppendStateKey appends StateKey(comp, k, name) to dst.
func AppendStateKey(dst []byte, comp string, k weir.Key, name string) []byte {
	dst = append(dst, comp...)
	dst = append(dst, 0)
	dst = codec.AppendUint64BE(dst, k.Hash)
	dst = append(dst, k.Encoded...)
	dst = append(dst, 0)
	return append(dst, name...)
}

func TimerKey(comp string, k weir.Key, id msgid.ID) []byte {
	b := keyedPrefix(comp, k.Hash)
	b = append(b, k.Encoded...)
	b = append(b, 0)
	return append(b, id...)
}

// KeyedRange returns the [lo, hi) key range of comp's keyed rows whose
// key hash lies in [lo, hi); with toEnd the range runs to the end of the
// hash space (hi is ignored).
func KeyedRange(comp string, lo, hi uint64, toEnd bool) ([]byte, []byte) {
	start := keyedPrefix(comp, lo)
	if toEnd {
		end := ownerPrefix(comp)
		end[len(end)-1] = 1 // comp 0x01: just past every comp 0x00 … key
		return start, end
	}
	return start, keyedPrefix(comp, hi)
}

func DedupPrefix(comp, stream string) []byte {
	b := ownerPrefix(comp)
	b = append(b, stream...)
	return append(b, 0)
}

func DedupKey(compact bool, comp, stream string, sysTS store.Timestamp, id msgid.ID) []byte {
	b := DedupPrefix(comp, stream)
	b = codec.AppendUint64BE(b, uint64(sysTS))
	if compact {
		return appendIDHash(b, id)
	}
	return append(b, id...)
}

// DedupBelow returns the key range of comp's dedup rows for stream with a
// SystemTimestamp below wm.
func DedupBelow(comp, stream string, wm store.Timestamp) ([]byte, []byte) {
	p := DedupPrefix(comp, stream)
	return p, codec.AppendUint64BE(append([]byte(nil), p...), uint64(wm))
}

func OutboxPrefix(partition string) []byte { return ownerPrefix(partition) }

func OutboxKey(partition string, id msgid.ID) []byte {
	return append(OutboxPrefix(partition), id...)
}

func PartitionStateKey(partition, name string) []byte {
	return append(ownerPrefix(partition), name...)
}

// FrontierRange is the key-hash range of the receiving partition a dedup
// frontier belongs to: [Lo, Hi), or [Lo, end of the hash space) with ToEnd.
type FrontierRange struct {
	Lo, Hi uint64
	ToEnd  bool
}

// Contains reports whether hash lies in r.
func (r FrontierRange) Contains(hash uint64) bool {
	return hash >= r.Lo && (r.ToEnd || hash < r.Hi)
}

// Overlaps reports whether r and o share a key hash.
func (r FrontierRange) Overlaps(o FrontierRange) bool {
	// r starts before o ends, and o starts before r ends.
	return (o.ToEnd || r.Lo < o.Hi) && (r.ToEnd || o.Lo < r.Hi)
}

// frontierPrefix starts every flow_state key of a dedup frontier.
const frontierPrefix = "dedup_frontier\x00"

// FrontierPrefix is the flow_state key prefix of every dedup frontier of
// computation comp (job/dedup.go).
func FrontierPrefix(comp string) []byte {
	return []byte(frontierPrefix + comp + "\x00")
}

// FrontierKey is the flow_state key of computation comp's dedup frontier
// for stream's messages from sender into the partition of key range r.
func FrontierKey(comp, stream, sender string, r FrontierRange) []byte {
	b := FrontierPrefix(comp)
	b = append(b, stream...)
	b = append(b, 0)
	b = append(b, sender...)
	b = append(b, 0)
	b = codec.AppendUint64BE(b, r.Lo)
	b = codec.AppendUint64BE(b, r.Hi)
	if r.ToEnd {
		return append(b, 1)
	}
	return append(b, 0)
}

// originSep separates a frontier's sender from its origin (ChannelSender):
// 0x00, the byte no name or id holds (the key's own separator), so that no
// sender and no (sender, origin) pair share a field.
const originSep = "\x00"

// ChannelSender is the sender field of the frontier of the sub-channel
// (sender, origin) (transport.Offer.Origin): sender alone if origin is
// empty, so that the frontiers of ordered senders keep their keys.
func ChannelSender(sender, origin string) string {
	if origin == "" {
		return sender
	}
	return sender + originSep + origin
}

// SplitChannelSender is ChannelSender's inverse.
func SplitChannelSender(s string) (sender, origin string) {
	sender, origin, _ = strings.Cut(s, originSep)
	return sender, origin
}

// ParseFrontierKey splits a key of FrontierPrefix(comp) into its stream,
// sender and range.
func ParseFrontierKey(comp string, key []byte) (stream, sender string, r FrontierRange, ok bool) {
	p := FrontierPrefix(comp)
	const tail = 1 + 8 + 8 + 1 // 0x00, BE64 lo, BE64 hi, toEnd
	if len(key) < len(p)+1+tail || string(key[:len(p)]) != string(p) || key[len(key)-tail] != 0 {
		return "", "", r, false
	}
	names := string(key[len(p) : len(key)-tail])
	stream, sender, ok = strings.Cut(names, "\x00")
	if !ok || stream == "" || sender == "" || !validSender(sender) {
		return "", "", r, false
	}
	t := key[len(key)-tail+1:]
	r.Lo, r.Hi = binary.BigEndian.Uint64(t[:8]), binary.BigEndian.Uint64(t[8:16])
	switch t[16] {
	case 0:
	case 1:
		r.ToEnd = true
	default:
		return "", "", r, false
	}
	return stream, sender, r, true
}

func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// tables used by the dedup variants.
func DedupTable(compact bool) store.Table {
	if compact {
		return store.CompactInputMessages
	}
	return store.InputMessages
}

// appendIDHash appends a 128-bit FNV-1a digest of id: the compact dedup
// layout keeps 16 bytes per id instead of the id itself.
func appendIDHash(dst []byte, id msgid.ID) []byte {
	h := fnv.New128a()
	h.Write([]byte(id))
	return h.Sum(dst)
}

// validSender reports whether a frontier key's sender field is a sender,
// or a sender and an origin (ChannelSender), each non-empty.
func validSender(s string) bool {
	sender, origin, sub := strings.Cut(s, originSep)
	return sender != "" && (!sub || (origin != "" && !strings.Contains(origin, originSep)))
}

// String shows r as [lo, hi) in hex, or [lo, end).
func (r FrontierRange) String() string {
	if r.ToEnd {
		return fmt.Sprintf("[%016x, end)", r.Lo)
	}
	return fmt.Sprintf("[%016x, %016x)", r.Lo, r.Hi)
}
