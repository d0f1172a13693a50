package handwritten

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir/store"
)

// KafkaCounter is the hand-written franz-go transactional loop with its
// counts persisted in the store: a consume-transform-produce loop on
// kgo.GroupTransactSession, one Kafka transaction per poll of up to Batch
// records, the consumed offsets committed in the transaction.
//
// Kafka and the store cannot commit atomically together, so each poll runs:
//
//  1. count the records (counts cached in memory, read on a miss);
//  2. commit to the store, synced: the new counts, the input offsets they
//     reflect (next), the offsets before the poll (prev) and the old value
//     of every count the poll changed (the undo record);
//  3. produce the {"key","count"} records and end the Kafka transaction,
//     which commits the consumed offsets (= next) with them.
//
// On start, after fencing any earlier instance of the transactional id
// (which aborts its open transaction), the group's committed offsets decide:
// equal to next, the store is current; equal to prev, the last Kafka
// transaction did not commit and the undo record rolls the counts back.
// Only one transaction is ever outstanding, so no other case exists (Run
// fails if it finds one). A transaction the session aborts (a rebalance)
// is rolled back the same way.
//
// Store layout:
//
//	states           Prefix 0x00 key   → BE64(count)
//	partition_states Prefix 0x00 "txn" → the txn record (next, prev, undo)
type KafkaCounter struct {
	Store   store.Store
	Brokers []string
	// In and Out are the input and output topics. Input values are JSON
	// objects with a string "key", written without transactions (so that
	// the end offsets Run reads at start are each partition's last record
	// + 1); outputs are {"count":n,"key":k} keyed by k (the default
	// partitioner spreads them).
	In, Out string
	// Group is the consumer group, transactional id and static member id.
	Group string
	// Batch bounds the records of one poll (one transaction).
	Batch int
	// Prefix names this counter's rows in the store (default "handwritten-kafka").
	Prefix string
	// ClientOpts are added to the session's options (tests: retry backoff).
	ClientOpts []kgo.Opt
	// Committed, if set, is called after each committed transaction with
	// its record count (the kill tests count commits with it).
	Committed func(records int)
}

// event is what the loop decodes of an input record.
type event struct {
	Key  string `json:"key"`
	Page string `json:"page"`
	Ms   int64  `json:"ms"`
	Ref  string `json:"ref"`
}

// countRecord is an output record's value.
type countRecord struct {
	Count int64  `json:"count"`
	Key   string `json:"key"`
}

// oldCount is an undo entry: key's count before the poll (absent if none).
type oldCount struct {
	key    string
	n      int64
	absent bool
}

// txnRecord is the store's view of the last transaction.
type txnRecord struct {
	next, prev map[int32]int64
	undo       []oldCount
}

// Run consumes In from the group's committed offsets up to the end offsets
// In has when Run starts (its input is complete) and returns the number of
// records processed by this call.
func (c KafkaCounter) Run(ctx context.Context) (int, error) {
	if c.Store == nil || len(c.Brokers) == 0 || c.In == "" || c.Out == "" || c.Group == "" {
		return 0, errors.New("handwritten: KafkaCounter lacks a store, brokers, topics or group")
	}
	if c.Batch <= 0 {
		return 0, fmt.Errorf("handwritten: KafkaCounter batch %d: must be positive", c.Batch)
	}
	if c.Prefix == "" {
		c.Prefix = "handwritten-kafka"
	}
	s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.TransactionalID(c.Group),
		kgo.ConsumerGroup(c.Group),
		// A restarted instance takes its predecessor's place in the group
		// at once instead of waiting for the session timeout.
		kgo.InstanceID(c.Group),
		kgo.ConsumeTopics(c.In),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(c.Out),
		kgo.ProducerLinger(0),
	}, c.ClientOpts...)...)
	if err != nil {
		return 0, fmt.Errorf("handwritten: kafka session: %w", err)
	}
	defer s.Close()
	rec, err := c.recover(ctx, s.Client())
	if err != nil {
		return 0, err
	}
	ends, err := c.endOffsets(ctx, s.Client())
	if err != nil {
		return 0, err
	}
	counts := newCountCache(c.Store, c.countKey)
	processed := 0
	for !reached(rec.next, ends) {
		fs := s.PollRecords(ctx, c.Batch)
		if err := ctx.Err(); err != nil {
			return processed, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return processed, fmt.Errorf("handwritten: %w", ferr)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return processed, fmt.Errorf("handwritten: begin: %w", err)
		}
		next := maps.Clone(rec.next)
		undo := map[string]oldCount{}
		var out []*kgo.Record
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			if derr != nil {
				return
			}
			var ev event
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				derr = fmt.Errorf("handwritten: %s/%d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
				return
			}
			n, err := counts.get(ctx, ev.Key)
			if err != nil {
				derr = err
				return
			}
			if _, ok := undo[ev.Key]; !ok {
				undo[ev.Key] = oldCount{key: ev.Key, n: n, absent: n == 0}
			}
			counts.set(ev.Key, n+1)
			v, _ := json.Marshal(countRecord{Count: n + 1, Key: ev.Key})
			out = append(out, &kgo.Record{Key: []byte(ev.Key), Value: v})
			next[r.Partition] = r.Offset + 1
		})
		if derr != nil {
			return processed, derr
		}
		pending := txnRecord{next: next, prev: rec.next, undo: sortedUndo(undo)}
		txn := store.NewTxn()
		counts.sync(txn)
		txn.Put(store.PartitionStates, c.txnKey(), encodeTxnRecord(pending))
		if err := c.Store.Commit(ctx, txn); err != nil {
			return processed, fmt.Errorf("handwritten: commit counts: %w", err)
		}
		if err := s.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return processed, fmt.Errorf("handwritten: produce: %w", err)
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return processed, fmt.Errorf("handwritten: end transaction: %w", err)
		}
		if !committed {
			// The session aborted (a rebalance): the group's offsets stay at
			// prev and it fetches from there again; so must the counts.
			if rec, err = c.rollback(ctx, pending, counts); err != nil {
				return processed, err
			}
			continue
		}
		rec = pending
		processed += len(out)
		if c.Committed != nil {
			c.Committed(len(out))
		}
	}
	return processed, nil
}

func (c KafkaCounter) txnKey() []byte { return append([]byte(c.Prefix), 0, 't', 'x', 'n') }

func (c KafkaCounter) countKey(key string) []byte {
	return append(append([]byte(c.Prefix), 0), key...)
}

// recover fences earlier instances, reads the group's committed offsets
// and makes the store agree with them (see KafkaCounter).
func (c KafkaCounter) recover(ctx context.Context, cl *kgo.Client) (txnRecord, error) {
	// Initializing the transactional id aborts a transaction an earlier
	// instance left open (or waits for its commit to complete), so the
	// group's offsets are final when read below.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return txnRecord{}, fmt.Errorf("handwritten: init producer id: %w", err)
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(kadm.RequireStable(ctx), c.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // no offsets committed yet (the group appears when the session joins)
	}
	if err != nil {
		return txnRecord{}, fmt.Errorf("handwritten: fetch offsets of group %s: %w", c.Group, err)
	}
	committed := map[int32]int64{}
	var oerr error
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic != c.In {
			return
		}
		if o.Err != nil {
			oerr = errors.Join(oerr, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if o.At >= 0 {
			committed[o.Partition] = o.At
		}
	})
	if oerr != nil {
		return txnRecord{}, fmt.Errorf("handwritten: fetch offsets of group %s: %w", c.Group, oerr)
	}
	rec, err := c.load(ctx)
	if err != nil {
		return txnRecord{}, err
	}
	switch {
	case maps.Equal(committed, rec.next):
		return rec, nil
	case maps.Equal(committed, rec.prev):
		return c.rollback(ctx, rec, nil)
	default:
		return txnRecord{}, fmt.Errorf("handwritten: group %s committed offsets %v, but the store holds counts for %v (previous %v): the state and Kafka disagree", c.Group, committed, rec.next, rec.prev)
	}
}

// rollback restores the counts rec's transaction changed and records that
// the store reflects rec.prev again; cache (if any) is updated too.
func (c KafkaCounter) rollback(ctx context.Context, rec txnRecord, cache *countCache) (txnRecord, error) {
	txn := store.NewTxn()
	for _, u := range rec.undo {
		if u.absent {
			txn.Delete(store.States, c.countKey(u.key))
		} else {
			txn.Put(store.States, c.countKey(u.key), binary.BigEndian.AppendUint64(nil, uint64(u.n)))
		}
		if cache != nil {
			cache.n[u.key] = u.n
		}
	}
	back := txnRecord{next: rec.prev, prev: rec.prev}
	txn.Put(store.PartitionStates, c.txnKey(), encodeTxnRecord(back))
	if err := c.Store.Commit(ctx, txn); err != nil {
		return txnRecord{}, fmt.Errorf("handwritten: roll back counts: %w", err)
	}
	return back, nil
}

func (c KafkaCounter) load(ctx context.Context) (txnRecord, error) {
	v, ok, err := c.Store.Get(ctx, store.PartitionStates, c.txnKey())
	if err != nil {
		return txnRecord{}, fmt.Errorf("handwritten: read txn record: %w", err)
	}
	if !ok {
		return txnRecord{next: map[int32]int64{}, prev: map[int32]int64{}}, nil
	}
	return decodeTxnRecord(v)
}

// endOffsets returns In's end offset per partition (partitions holding
// nothing are left out).
func (c KafkaCounter) endOffsets(ctx context.Context, cl *kgo.Client) (map[int32]int64, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, c.In)
	if err != nil {
		return nil, fmt.Errorf("handwritten: end offsets of %s: %w", c.In, err)
	}
	out := map[int32]int64{}
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = errors.Join(lerr, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
		} else if o.Offset > 0 {
			out[o.Partition] = o.Offset
		}
	})
	return out, lerr
}

// reached reports whether next is at or past every end offset.
func reached(next, ends map[int32]int64) bool {
	for p, e := range ends {
		if next[p] < e {
			return false
		}
	}
	return true
}

func sortedUndo(m map[string]oldCount) []oldCount {
	out := make([]oldCount, 0, len(m))
	for _, u := range m {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// The txn record: version byte 1, then next and prev as (uvarint count,
// (varint partition, varint offset)…), then the undo entries as (uvarint
// count, (uvarint key length, key, flag byte 1 = absent, varint count)…).
const txnRecordVersion = 1

func encodeTxnRecord(r txnRecord) []byte {
	b := []byte{txnRecordVersion}
	for _, m := range []map[int32]int64{r.next, r.prev} {
		ps := make([]int32, 0, len(m))
		for p := range m {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		b = binary.AppendUvarint(b, uint64(len(ps)))
		for _, p := range ps {
			b = binary.AppendVarint(b, int64(p))
			b = binary.AppendVarint(b, m[p])
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.undo)))
	for _, u := range r.undo {
		b = binary.AppendUvarint(b, uint64(len(u.key)))
		b = append(b, u.key...)
		flag := byte(0)
		if u.absent {
			flag = 1
		}
		b = append(b, flag)
		b = binary.AppendVarint(b, u.n)
	}
	return b
}

var errBadTxnRecord = errors.New("handwritten: malformed txn record")

func decodeTxnRecord(b []byte) (txnRecord, error) {
	if len(b) == 0 || b[0] != txnRecordVersion {
		return txnRecord{}, errBadTxnRecord
	}
	b = b[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	sv := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var r txnRecord
	for i := range 2 {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return txnRecord{}, errBadTxnRecord
		}
		m := make(map[int32]int64, n)
		for range n {
			p, ok1 := sv()
			off, ok2 := sv()
			if !ok1 || !ok2 {
				return txnRecord{}, errBadTxnRecord
			}
			m[int32(p)] = off
		}
		if i == 0 {
			r.next = m
		} else {
			r.prev = m
		}
	}
	n, ok := uv()
	if !ok || n > uint64(len(b)) {
		return txnRecord{}, errBadTxnRecord
	}
	for range n {
		kl, ok := uv()
		if !ok || kl+1 > uint64(len(b)) {
			return txnRecord{}, errBadTxnRecord
		}
		u := oldCount{key: string(b[:kl]), absent: b[kl] == 1}
		b = b[kl+1:]
		if u.n, ok = sv(); !ok {
			return txnRecord{}, errBadTxnRecord
		}
		r.undo = append(r.undo, u)
	}
	if len(b) != 0 {
		return txnRecord{}, errBadTxnRecord
	}
	return r, nil
}
