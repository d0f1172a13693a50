package disttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/store"
)

// Counter is the counter example's input and output: queue events (its
// partitions) and counts.
type Counter struct {
	Events, Counts *queue.Queue
	// Want is the number of events written per key.
	Want map[string]int
}

// NewCounter creates the queues of the counter example in st.
func NewCounter(ctx context.Context, st store.Store, eventPartitions, countPartitions int) (*Counter, error) {
	ev, err := queue.Create(ctx, st, "events", eventPartitions)
	if err != nil {
		return nil, err
	}
	cn, err := queue.Create(ctx, st, "counts", countPartitions)
	if err != nil {
		return nil, err
	}
	return &Counter{Events: ev, Counts: cn, Want: map[string]int{}}, nil
}

// Write appends n events over keys (drawn from r) in commits of batch rows.
func (c *Counter) Write(ctx context.Context, r *rand.Rand, n, keys, batch int) error {
	st := c.Events.Store()
	for done := 0; done < n; {
		txn := store.NewTxn()
		per := map[int][]weir.Row{}
		for i := 0; i < batch && done < n; i, done = i+1, done+1 {
			k := fmt.Sprintf("k%03d", r.IntN(keys))
			c.Want[k]++
			p := r.IntN(c.Events.Partitions())
			per[p] = append(per[p], weir.Row{"key": k, "i": int64(done)})
		}
		ps := make([]int, 0, len(per))
		for p := range per {
			ps = append(ps, p)
		}
		sort.Ints(ps)
		for _, p := range ps {
			if err := c.Events.Append(txn, p, per[p]...); err != nil {
				return err
			}
		}
		if err := st.Commit(ctx, txn); err != nil {
			return fmt.Errorf("write events: %w", err)
		}
	}
	return nil
}

// Read reads every count the pipeline wrote, per key.
func (c *Counter) Read(ctx context.Context) (map[string][]int64, int, error) {
	got := map[string][]int64{}
	total := 0
	for p := 0; p < c.Counts.Partitions(); p++ {
		rows, err := c.Counts.Read(ctx, p, 0, 0)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range rows {
			k, _ := r.Row["key"].(string)
			n, _ := r.Row["count"].(int64)
			got[k] = append(got[k], n)
			total++
		}
	}
	for k := range got {
		sort.Slice(got[k], func(i, j int) bool { return got[k][i] < got[k][j] })
	}
	return got, total, nil
}

// Total is the number of events written.
func (c *Counter) Total() int {
	n := 0
	for _, v := range c.Want {
		n += v
	}
	return n
}
