package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// observer is the concurrent read-committed reader of one life (C3, C4):
// every PollPeriod it reads, through the engine's own store handle,
//
//	Counter's states (S1), the source offsets (O), the Reader outboxes (B),
//	Counter's states again (S2), and the output queue rows it has not seen,
//
// then confirms the snapshot: it commits a marker row (a synced write) and
// checks that no power loss began meanwhile. A batch Pebble made visible
// lies in the WAL before the marker, so a successful marker commit means
// everything the snapshot read was durable (store/pebble's package comment:
// a read may see a batch whose fsync has not returned). Only confirmed
// snapshots are checked; unconfirmed ones are kept aside to count
// exposures (rows visible before durable that a power loss then removed).
//
// The checks, on a confirmed snapshot:
//
//   - C4, no gap (offsets never ahead of state): for each key k, S2(k) +
//     B(k) ≥ need_O(k), the number of source rows of k below the committed
//     offsets. A row below its partition's offset was committed by the
//     Reader epoch that moved the offset; its output sits in the outbox
//     until the Counter's commit of it is acknowledged (Transform), or the
//     offset moved only after that acknowledgement (Swift). Reading O before
//     B before S2 is what makes this sound without a snapshot: an output
//     leaves B only after the Counter commit that S2 then sees.
//   - C4, no overlap (Transform reader only): S1(k) ≤ need_O(k). Counter
//     can process a row only after the Reader epoch that read it (and moved
//     the offset) committed, and S1 is read before O.
//   - C3, no output that later disappears: every output row (partition,
//     index, key, count) seen in a confirmed snapshot must be in every later
//     view (checked at each restart and at the end), unchanged.
type observer struct {
	s    *sim
	l    *life
	next []uint64
	need needOf
	mark uint64
	stop chan struct{}
	done chan struct{}
}

func startObserver(s *sim, l *life) *observer {
	o := &observer{s: s, l: l, next: make([]uint64, s.sc.OutputPartitions), need: needOf{in: s.in},
		stop: make(chan struct{}), done: make(chan struct{})}
	go o.loop()
	return o
}

func (o *observer) close() {
	close(o.stop)
	select {
	case <-o.done:
	case <-time.After(2 * time.Second):
		// Blocked in a dead process's store: abandoned with it.
	}
}

func (o *observer) loop() {
	defer close(o.done)
	t := time.NewTicker(o.s.opts.PollPeriod)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		o.poll()
	}
}

func (o *observer) poll() {
	ctx := context.Background()
	st, sc := o.l.st, o.s.sc
	s1, err := readStates(ctx, st, sc.ExternalState)
	if err != nil {
		return
	}
	offs, err := readOffsets(ctx, st, sc.Workload)
	if err != nil {
		return
	}
	var box map[string]int
	if !sc.SwiftReader {
		if box, err = readOutbox(ctx, st, sc.Workload); err != nil {
			return
		}
	}
	s2, err := readStates(ctx, st, sc.ExternalState)
	if err != nil {
		return
	}
	rows, err := readOutputs(ctx, st, sc.OutputPartitions, o.next)
	if err != nil {
		return
	}
	var sum int64
	for _, v := range s2 {
		sum += v
	}
	o.s.progress.Store(sum)

	o.mark++
	txn := store.NewTxn()
	txn.Put(observerTable, []byte("marker"), codec.AppendUint64BE(nil, o.mark))
	if err := st.Commit(ctx, txn); err != nil || o.l.crashing.Load() {
		o.s.ledger.unconfirmed(rows)
		o.s.stats.add(func(s *Stats) { s.Discarded++ })
		return
	}
	need := o.need.at(offs)
	for k, n := range need {
		if got := int(s2[k]) + box[k]; got < n {
			o.s.violate("C4", "offset ahead of state: key %s has %d source rows below the committed offsets %v, but Counter state %d + Reader outbox %d = %d",
				k, n, offs, s2[k], box[k], got)
		}
	}
	if !sc.SwiftReader {
		for k, v := range s1 {
			if int(v) > need[k] {
				o.s.violate("C4", "state ahead of offsets: Counter state of key %s is %d, but only %d of its source rows lie below the committed offsets %v",
					k, v, need[k], offs)
			}
		}
	}
	o.s.ledger.confirm(o.s, rows)
	for _, r := range rows {
		o.next[r.Part] = max(o.next[r.Part], r.Index+1)
	}
	o.s.stats.add(func(s *Stats) { s.Polls++ })
}

type rowID struct {
	part  int
	index uint64
}

// ledger keeps the output rows the observers saw, across lives.
type ledger struct {
	mu        sync.Mutex
	confirmed map[rowID]outRow
	tentative map[rowID]outRow
}

func (l *ledger) confirm(s *sim, rows []outRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.confirmed == nil {
		l.confirmed = map[rowID]outRow{}
	}
	for _, r := range rows {
		id := rowID{r.Part, r.Index}
		if old, ok := l.confirmed[id]; ok && old != r {
			s.violate("C3", "output row %d/%d changed from %s=%d to %s=%d", r.Part, r.Index, old.Key, old.Count, r.Key, r.Count)
		}
		l.confirmed[id] = r
	}
}

func (l *ledger) unconfirmed(rows []outRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tentative == nil {
		l.tentative = map[rowID]outRow{}
	}
	for _, r := range rows {
		l.tentative[rowID{r.Part, r.Index}] = r
	}
}

// verify checks that every confirmed row is in rows (the current durable
// view), unchanged; it returns the number of confirmed rows and the
// number of exposures (tentative rows absent or changed).
func (l *ledger) verify(s *sim, rows []outRow, when string) (confirmed, exposures int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := make(map[rowID]outRow, len(rows))
	for _, r := range rows {
		now[rowID{r.Part, r.Index}] = r
	}
	for id, r := range l.confirmed {
		got, ok := now[id]
		switch {
		case !ok:
			s.violate("C3", "%s: output row %d/%d (%s=%d), seen committed during the run, is gone", when, id.part, id.index, r.Key, r.Count)
		case got != r:
			s.violate("C3", "%s: output row %d/%d, seen as %s=%d during the run, is now %s=%d", when, id.part, id.index, r.Key, r.Count, got.Key, got.Count)
		}
	}
	for id, r := range l.tentative {
		if _, ok := l.confirmed[id]; ok {
			continue
		}
		if got, ok := now[id]; !ok || got != r {
			exposures++
		}
	}
	l.tentative = nil
	return len(l.confirmed), exposures
}

func (r outRow) String() string { return fmt.Sprintf("%d/%d:%s=%d", r.Part, r.Index, r.Key, r.Count) }
