package handwritten

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/store"
)

// QueueCounter is the hand-written exactly-once loop over weir queues.
//
// One goroutine per partition of In (the queue's partitions are the unit of
// work, as a QueueSource's are in weir). Each iteration reads up to Batch
// rows from the partition's offset, counts them per key (counts are cached
// in memory and read from the store on a miss), and commits in ONE synced
// store transaction: the output rows appended to Out (routed by the hash of
// "key", as SyncQueueSink routes them), the new count of every key the batch
// touched, and the partition's next offset. A crash at any point leaves
// either all of a batch's effects or none, and a restart resumes at the
// committed offset with the committed counts: exactly-once without leases,
// dedup rows or an engine. It assumes one writer per partition (one process
// runs the loop over a data directory; the store's lock enforces it).
//
// Store layout (Prefix keeps two counters in one store apart):
//
//	states           Prefix 0x00 key        → BE64(count)
//	partition_states Prefix 0x00 BE32(part) → BE64(next offset of In)
type QueueCounter struct {
	Store   store.Store
	In, Out *queue.Queue
	// Batch is the number of rows per iteration and commit (B).
	Batch int
	// Prefix names this counter's rows in the store (default "handwritten").
	Prefix string
	// Committed, if set, is called after each commit with the partition and
	// its new offset (the kill tests count commits with it). It may be
	// called from several goroutines at once.
	Committed func(partition int, next uint64)
}

// keyColumn is the column the counter groups by.
const keyColumn = "key"

// Run processes every partition of In up to its end (In is complete: the
// rows it holds when a partition's read comes back empty are all there is)
// and returns the number of input rows processed by this call.
func (c QueueCounter) Run(ctx context.Context) (int, error) {
	if c.Store == nil || c.In == nil || c.Out == nil {
		return 0, errors.New("handwritten: QueueCounter lacks a store or a queue")
	}
	if c.Batch <= 0 {
		return 0, fmt.Errorf("handwritten: QueueCounter batch %d: must be positive", c.Batch)
	}
	if c.Prefix == "" {
		c.Prefix = "handwritten"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make([]int, c.In.Partitions())
	errs := make([]error, len(done))
	var wg sync.WaitGroup
	for p := range done {
		wg.Go(func() {
			done[p], errs[p] = c.runPartition(ctx, p)
			if errs[p] != nil {
				cancel() // one failed partition stops the others
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range done {
		total += n
	}
	return total, errors.Join(errs...)
}

func (c QueueCounter) offsetKey(p int) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(c.Prefix), 0), uint32(p))
}

func (c QueueCounter) countKey(key string) []byte {
	return append(append([]byte(c.Prefix), 0), key...)
}

// Offset returns partition p's committed next offset.
func (c QueueCounter) Offset(ctx context.Context, p int) (uint64, error) {
	if c.Prefix == "" {
		c.Prefix = "handwritten"
	}
	v, ok, err := c.Store.Get(ctx, store.PartitionStates, c.offsetKey(p))
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("handwritten: offset of partition %d: %d bytes, want 8", p, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func (c QueueCounter) runPartition(ctx context.Context, p int) (int, error) {
	off, err := c.Offset(ctx, p)
	if err != nil {
		return 0, err
	}
	counts := newCountCache(c.Store, c.countKey)
	processed := 0
	for {
		rows, err := c.In.Read(ctx, p, off, c.Batch)
		if err != nil {
			return processed, err
		}
		if len(rows) == 0 {
			return processed, nil
		}
		txn := store.NewTxn()
		for _, r := range rows {
			k, ok := r.Row[keyColumn].(string)
			if !ok {
				return processed, fmt.Errorf("handwritten: queue %s partition %d row %d: column %q is %T, want a string", c.In.Name(), p, r.Index, keyColumn, r.Row[keyColumn])
			}
			n, err := counts.incr(ctx, k)
			if err != nil {
				return processed, err
			}
			out := weir.Row{keyColumn: k, "count": n}
			if err := c.Out.Append(txn, queue.PartitionOf(out, keyColumn, c.Out.Partitions(), nil), out); err != nil {
				return processed, err
			}
		}
		counts.sync(txn)
		off = rows[len(rows)-1].Index + 1
		txn.Put(store.PartitionStates, c.offsetKey(p), binary.BigEndian.AppendUint64(nil, off))
		if err := c.Store.Commit(ctx, txn); err != nil {
			return processed, fmt.Errorf("handwritten: partition %d: commit: %w", p, err)
		}
		processed += len(rows)
		if c.Committed != nil {
			c.Committed(p, off)
		}
	}
}

// countCache is one partition's counts: the committed value of every key
// seen, read from the store on a miss, and the keys changed since the last
// sync. The loop owns its partition's keys (rows are partitioned by key), so
// the cache is never stale.
type countCache struct {
	st    store.Store
	key   func(string) []byte
	n     map[string]int64
	dirty map[string]struct{}
}

func newCountCache(st store.Store, key func(string) []byte) *countCache {
	return &countCache{st: st, key: key, n: map[string]int64{}, dirty: map[string]struct{}{}}
}

// get returns k's count, reading the store on a miss.
func (c *countCache) get(ctx context.Context, k string) (int64, error) {
	if n, ok := c.n[k]; ok {
		return n, nil
	}
	v, ok, err := c.st.Get(ctx, store.States, c.key(k))
	if err != nil {
		return 0, fmt.Errorf("handwritten: read count of %q: %w", k, err)
	}
	var n int64
	if ok {
		if len(v) != 8 {
			return 0, fmt.Errorf("handwritten: count of %q: %d bytes, want 8", k, len(v))
		}
		n = int64(binary.BigEndian.Uint64(v))
	}
	c.n[k] = n
	return n, nil
}

// set changes k's count (to be written by the next sync).
func (c *countCache) set(k string, n int64) {
	c.n[k] = n
	c.dirty[k] = struct{}{}
}

// incr adds one to k's count and returns the new count.
func (c *countCache) incr(ctx context.Context, k string) (int64, error) {
	n, err := c.get(ctx, k)
	if err != nil {
		return 0, err
	}
	c.set(k, n+1)
	return n + 1, nil
}

// sync writes the changed counts into txn.
func (c *countCache) sync(txn *store.Txn) {
	for k := range c.dirty {
		txn.Put(store.States, c.key(k), binary.BigEndian.AppendUint64(nil, uint64(c.n[k])))
	}
	clear(c.dirty)
}
