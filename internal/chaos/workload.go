package chaos

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/externalstate"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/store"
)

// Names of the simulated pipeline:
//
//	source "events" (testconn, partitions p0..) → Reader → "words"
//	  [→ Relay (SwiftMap) → "relayed"] → Counter (group_by key) → "counts"
//	  → sink "out" (SyncQueueSink or AsyncQueueSink) → queue "counts"
const (
	readerComp  = "Reader"
	relayComp   = "Relay"
	counterComp = "Counter"
	outputQueue = "counts"
	// observerTable holds the observer's confirmation marker.
	observerTable store.Table = "chaos_observer"
)

// input is a generated workload: the rows of each source partition and,
// per key, how many rows carry it (the reference model's final state).
type input struct {
	parts    map[string][]weir.Row
	keysOf   map[string][]string // partition → key of each offset ("": poisoned)
	expected map[string]int
	// poisoned holds the seqs of the poisoned rows (Workload.Poison).
	poisoned map[int64]bool
}

// generate builds the workload of seed. It depends only on (seed, w): the
// metamorphic test runs the same input under different configurations.
func generate(seed uint64, w Workload) *input {
	r := rand.New(rand.NewPCG(seed, 0x10ad))
	in := &input{parts: map[string][]weir.Row{}, keysOf: map[string][]string{}, expected: map[string]int{}, poisoned: map[int64]bool{}}
	for i := 0; i < w.Messages; i++ {
		p := fmt.Sprintf("p%d", i%w.SourcePartitions)
		k := fmt.Sprintf("k%03d", r.IntN(w.Keys))
		row := weir.Row{"key": k, "seq": int64(i), "event_ts": int64(i) * int64(time.Millisecond)}
		if w.Poison > 0 && i%w.Poison == w.Poison-1 {
			row["poison"] = true
			in.parts[p] = append(in.parts[p], row)
			in.keysOf[p] = append(in.keysOf[p], "")
			in.poisoned[int64(i)] = true
			continue
		}
		in.parts[p] = append(in.parts[p], row)
		in.keysOf[p] = append(in.keysOf[p], k)
		in.expected[k]++
	}
	return in
}

// needOf is the reference model over the committed input: per key, how
// many source rows lie below the committed source offsets. It extends its
// last answer when offsets only grew (the common case between polls).
type needOf struct {
	in   *input
	offs map[string]uint64
	need map[string]int
}

func (n *needOf) at(offs map[string]uint64) map[string]int {
	grew := n.need != nil
	for p, o := range offs {
		if o < n.offs[p] {
			grew = false
		}
	}
	if !grew {
		n.offs, n.need = map[string]uint64{}, map[string]int{}
	}
	for p, o := range offs {
		keys := n.in.keysOf[p]
		for i := n.offs[p]; i < o && i < uint64(len(keys)); i++ {
			if keys[i] != "" { // a poisoned row is counted by no key
				n.need[keys[i]]++
			}
		}
		n.offs[p] = o
	}
	return n.need
}

// outRow is one row of the output queue: identity (partition, index) and
// content (key, count).
type outRow struct {
	Part  int
	Index uint64
	Key   string
	Count int64
}

// readOutputs returns the output queue's rows of each partition from
// from[p] on (from nil: all rows).
func readOutputs(ctx context.Context, st store.Store, partitions int, from []uint64) ([]outRow, error) {
	q, err := queue.Open(ctx, st, outputQueue)
	if err != nil {
		return nil, err
	}
	var out []outRow
	for p := 0; p < partitions; p++ {
		var f uint64
		if from != nil {
			f = from[p]
		}
		rows, err := q.Read(ctx, p, f, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			k, _ := r.Row["key"].(string)
			c, _ := r.Row["count"].(int64)
			out = append(out, outRow{Part: p, Index: r.Index, Key: k, Count: c})
		}
	}
	return out, nil
}

// readStates returns Counter's committed per-key count (states table:
// comp 0x00 BE64(hash) keyEncoded 0x00 "count" → JSON int).
//
// With external set, Counter is builtin.ExternalCounter and its counts are
// the rows of the external state table key_counts.
func readStates(ctx context.Context, st store.Store, external bool) (map[string]int64, error) {
	if external {
		out := map[string]int64{}
		err := externalstate.Scan(ctx, st, builtin.KeyCountsTable, nil, nil, 0, func(_ []byte, r map[string]any) (bool, error) {
			k, _ := r["key"].(string)
			n, ok := r["count"].(int64)
			if !ok {
				return false, fmt.Errorf("key_counts row %v has no int64 count", r)
			}
			out[k] = n
			return true, nil
		})
		return out, err
	}
	prefix := []byte(counterComp + "\x00")
	hi := []byte(counterComp + "\x01")
	const suffix = "\x00count"
	out := map[string]int64{}
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.States, Lo: prefix, Hi: hi}, func(k, v []byte) bool {
		if len(k) < len(prefix)+8+len(suffix) || string(k[len(k)-len(suffix):]) != suffix {
			return true
		}
		// The group key is (key) or, with Uint32Bucket, (bucket, key).
		vals, err := codec.DecodeKey(k[len(prefix)+8 : len(k)-len(suffix)])
		if err != nil || len(vals) == 0 || len(vals) > 2 {
			derr = fmt.Errorf("state key %q: %v", k, err)
			return false
		}
		key, _ := vals[len(vals)-1].(string)
		var n int64
		if _, err := fmt.Sscan(string(v), &n); err != nil {
			derr = fmt.Errorf("state of %s = %q: %v", key, v, err)
			return false
		}
		out[key] = n
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// readOffsets returns the committed source offset of each source partition
// (partition_states row "Reader@pX" 0x00 "source": version byte, uvarint
// offset, …; see job/source.go).
func readOffsets(ctx context.Context, st store.Store, w Workload) (map[string]uint64, error) {
	out := map[string]uint64{}
	for i := 0; i < w.SourcePartitions; i++ {
		p := fmt.Sprintf("p%d", i)
		key := []byte(string(plan.SourcePartitionID(readerComp, p)) + "\x00source")
		v, ok, err := st.Get(ctx, store.PartitionStates, key)
		if err != nil {
			return nil, err
		}
		if !ok {
			out[p] = 0
			continue
		}
		if len(v) == 0 || v[0] != 1 {
			return nil, fmt.Errorf("source state of %s: unknown version", p)
		}
		off, _, err := codec.Uvarint(v[1:])
		if err != nil {
			return nil, fmt.Errorf("source state of %s: %w", p, err)
		}
		out[p] = off
	}
	return out, nil
}

// readOutbox counts, per key, the outputs in the Reader partitions'
// outboxes (partition_output_messages "Reader@pX" 0x00 id → version byte,
// stream, 3 uvarints, row; see tables/records.go): source rows whose
// Reader epoch committed and whose delivery is not yet erased.
func readOutbox(ctx context.Context, st store.Store, w Workload) (map[string]int, error) {
	out := map[string]int{}
	for i := 0; i < w.SourcePartitions; i++ {
		prefix := []byte(string(plan.SourcePartitionID(readerComp, fmt.Sprintf("p%d", i))) + "\x00")
		hi := append(append([]byte(nil), prefix[:len(prefix)-1]...), 1)
		var derr error
		err := st.Scan(ctx, store.Range{Table: store.OutputMessages, Lo: prefix, Hi: hi}, func(k, v []byte) bool {
			row, err := decodeOutboxRow(v)
			if err != nil {
				derr = fmt.Errorf("outbox row %q: %w", k, err)
				return false
			}
			key, _ := row["key"].(string)
			out[key]++
			return true
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeOutboxRow(b []byte) (weir.Row, error) {
	if len(b) == 0 || b[0] != 1 {
		return nil, errors.New("unknown record version")
	}
	b = b[1:]
	_, b, err := codec.String(b)
	for i := 0; i < 3 && err == nil; i++ {
		_, b, err = codec.Uvarint(b)
	}
	if err != nil {
		return nil, err
	}
	row, _, err := codec.DecodeRow(b)
	return row, err
}

// pacedSource is the testconn source behind a release valve: partition p_i
// shows only the rows whose global index (i + k·partitions) is below the
// released count, which the driver raises every cycle, like a producer
// writing while the pipeline runs. Without it a seed's input is processed
// in a few milliseconds, before any episode can start.
type pacedSource struct {
	*testconn.Source
	released *atomic.Int64
	parts    int
	// hidden, while set, leaves partition hidden.Load() out of Partitions
	// (EpNewPartition reveals it).
	hidden *atomic.Pointer[string]
}

func (s *pacedSource) Partitions(ctx context.Context) ([]string, error) {
	keys, err := s.Source.Partitions(ctx)
	h := s.hidden.Load()
	if err != nil || h == nil {
		return keys, err
	}
	out := keys[:0:0]
	for _, k := range keys {
		if k != *h {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *pacedSource) Open(ctx context.Context, key string) (connector.SourcePartition, error) {
	p, err := s.Source.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	var i int
	if _, err := fmt.Sscanf(key, "p%d", &i); err != nil {
		return nil, fmt.Errorf("paced source: partition key %q: %w", key, err)
	}
	return &pacedPartition{SourcePartition: p, src: s, index: i}, nil
}

type pacedPartition struct {
	connector.SourcePartition
	src   *pacedSource
	index int
}

func (p *pacedPartition) Read(ctx context.Context, from connector.Offset, maxRows, maxBytes int) (connector.Batch, error) {
	r := p.src.released.Load() - int64(p.index) // rows of this partition: ceil(r / parts)
	visible := int64(0)
	if r > 0 {
		visible = (r + int64(p.src.parts) - 1) / int64(p.src.parts)
	}
	maxRows = int(min(int64(maxRows), max(0, visible-int64(from))))
	return p.SourcePartition.Read(ctx, from, maxRows, maxBytes)
}

// deadQueue receives the dead letters of Counter (Workload.Poison).
const deadQueue = "dead"

// poisoning wraps Counter's code: on a poisoned row it fails after the
// code ran (counted, emitted), so that dead-lettering must undo the call.
func poisoning(c weir.Computation) weir.Computation {
	run := c.OnMessage
	c.OnMessage = func(ctx weir.Context, m *weir.Message, out weir.Output) error {
		if err := run(ctx, m, out); err != nil {
			return err
		}
		if m.Payload["poison"] == true {
			return fmt.Errorf("chaos: poisoned row seq %v", m.Payload["seq"])
		}
		return nil
	}
	return c
}

// readDeadLetters returns how many dead letters the queue "dead" holds per
// poisoned seq.
func readDeadLetters(ctx context.Context, st store.Store) (map[int64]int, error) {
	q, err := queue.Open(ctx, st, deadQueue)
	if err != nil {
		return nil, err
	}
	rows, err := q.Read(ctx, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	out := map[int64]int{}
	for _, r := range rows {
		payload, _ := r.Row["payload"].(map[string]any)
		seq, ok := payload["seq"].(int64)
		if !ok {
			return nil, fmt.Errorf("dead letter %d has no payload seq: %v", r.Index, r.Row)
		}
		out[seq]++
	}
	return out, nil
}
