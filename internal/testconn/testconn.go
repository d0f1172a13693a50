// Package testconn holds connectors for the engine's own tests: a finite,
// deterministic in-memory source and a collecting sync sink that writes
// into the pipeline's store (so what it collected is exactly what
// committed). They are test fixtures, never a shipped path: users get the
// queue connector.
package testconn

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Source is a finite source whose partitions hold fixed rows.
type Source struct {
	mu    sync.Mutex
	parts map[string][]weir.Row
	// Reads counts Read calls, ReportedNext the last reported offsets.
	Reads        int
	ReportedNext map[string]connector.Offset
	// Infinite makes the source report Finite() == false.
	Infinite bool
}

// NewSource returns a source with the given partitions.
func NewSource(parts map[string][]weir.Row) *Source {
	return &Source{parts: parts, ReportedNext: map[string]connector.Offset{}}
}

// Append adds rows to a partition (for infinite sources).
func (s *Source) Append(key string, rows ...weir.Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[key] = append(s.parts[key], rows...)
}

// Partitions implements connector.Source.
func (s *Source) Partitions(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.parts))
	for k := range s.parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// Open implements connector.Source.
func (s *Source) Open(_ context.Context, key string) (connector.SourcePartition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.parts[key]; !ok {
		return nil, fmt.Errorf("testconn: no partition %q", key)
	}
	return &partition{s: s, key: key}, nil
}

// Close implements connector.Source.
func (s *Source) Close() error { return nil }

type partition struct {
	s   *Source
	key string
}

func (p *partition) Key() string { return p.key }

// Read returns rows with write timestamps derived from the offset, so that
// they are non-zero, increasing and identical on every replay. A row's
// int64 column "event_ts" (unix nanoseconds) becomes its event time.
func (p *partition) Read(_ context.Context, from connector.Offset, maxRows, _ int) (connector.Batch, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.Reads++
	rows := p.s.parts[p.key]
	var b connector.Batch
	for o := int(from); o < len(rows) && len(b.Records) < maxRows; o++ {
		var ev time.Time
		if ns, ok := rows[o]["event_ts"].(int64); ok {
			ev = time.Unix(0, ns).UTC()
		}
		b.Records = append(b.Records, connector.Record{
			EventTimestamp: ev,
			Offset:         connector.Offset(o),
			WriteTimestamp: store.Timestamp(uint64(1_700_000_000+o/1000)<<store.TimestampCounterBits | uint64(o%1000+1)),
			Row:            rows[o],
			Size:           64,
		})
	}
	b.Next = from + connector.Offset(len(b.Records))
	b.End = int(b.Next) >= len(rows)
	return b, nil
}

func (p *partition) ReportCommitted(_ context.Context, next connector.Offset) error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.ReportedNext[p.key] = next
	return nil
}

func (p *partition) Finite() bool { return !p.s.Infinite }
func (p *partition) Close() error { return nil }

// CollectTable is where collecting sinks write.
const CollectTable store.Table = "test_collected"

// Collector writes each message as a row keyed by (sink id, message id) in
// CollectTable, inside the epoch transaction.
type Collector struct{ SinkID string }

// Write implements connector.SyncWriter.
func (c Collector) Write(_ context.Context, txn *store.Txn, msgs []*weir.Message) error {
	for _, m := range msgs {
		v, err := codec.AppendRow(nil, m.Payload)
		if err != nil {
			return err
		}
		txn.Put(CollectTable, collectKey(c.SinkID, m.ID), v)
	}
	return nil
}

func collectKey(sink string, id msgid.ID) []byte {
	return append(append([]byte(sink), 0), id...)
}

// NewCollectSink returns a sync sink writing into CollectTable.
func NewCollectSink(sinkID string) connector.Sink {
	return connector.NewSyncSink(Collector{SinkID: sinkID})
}

// Collected is one collected message.
type Collected struct {
	ID  msgid.ID
	Row weir.Row
}

// ReadCollected returns what sink id committed, in id order.
func ReadCollected(ctx context.Context, st store.Store, sinkID string) ([]Collected, error) {
	p := append([]byte(sinkID), 0)
	hi := append([]byte(sinkID), 1)
	var out []Collected
	var derr error
	err := st.Scan(ctx, store.Range{Table: CollectTable, Lo: p, Hi: hi}, func(k, v []byte) bool {
		row, _, err := codec.DecodeRow(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, Collected{ID: msgid.ID(k[len(p):]), Row: row})
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

var fired = weir.NewState[int64]("fired")

// TimerCounter is a Transform with an event-time timer stream "fire": every
// message registers a timer at its event time plus one second (event times
// are distinct, so no two timers of a key coincide), and each fired timer
// increments the key's count and emits {"key", "count"}. The oracle is the
// counter's: counts 1..n once each, now driven by timers.
func TimerCounter() weir.Computation {
	return weir.Computation{
		Kind: weir.KindTransform,
		OnMessage: func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
			return out.AddTimer("fire", weir.TimerRequest{Trigger: msg.EventTimestamp.Add(time.Second)})
		},
		OnTimer: func(ctx weir.Context, t *weir.Timer, out weir.Output) error {
			n, err := fired.Get(ctx)
			if err != nil {
				return err
			}
			n++
			fired.Set(ctx, n)
			k, err := codec.DecodeKey([]byte(ctx.Key().Encoded))
			if err != nil || len(k) != 1 {
				return fmt.Errorf("timer key: %v", err)
			}
			return out.Add("counts", weir.Row{"key": k[0], "count": n})
		},
	}
}

// Uint32Bucketer is a passthrough of the given kind that adds a column
// "bucket" to each row: a uint32 derived from the row's "key". Grouping a
// downstream computation by (bucket, key) puts a non-canonical integer
// first in its key, whose routing must not change when an output is
// re-sent from the outbox, where it decodes as uint64 (issue 23, item 3).
// The row keeps its key, so the counter's oracle is unchanged.
func Uint32Bucketer(kind weir.Kind) weir.Computation {
	return weir.Computation{Kind: kind, OnMessage: func(_ weir.Context, msg *weir.Message, out weir.Output) error {
		k, _ := msg.Payload["key"].(string)
		row := weir.Row{"bucket": uint32(codec.Hash64([]byte(k)) >> 33)}
		for c, v := range msg.Payload {
			row[c] = v
		}
		return out.Add(out.Streams()[0], row)
	}}
}
