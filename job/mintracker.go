package job

import (
	"container/heap"

	"github.com/weir-stream/weir/store"
)

// tsMultiset is a multiset of timestamps with O(log n) add and amortized
// O(log n) min: a count per timestamp plus a min-heap with lazy deletion.
// Jobs use it to report the smallest SystemTimestamp of what is in flight
// without scanning everything in flight every epoch.
type tsMultiset struct {
	counts map[store.Timestamp]int
	h      tsHeap
}

func (m *tsMultiset) add(ts store.Timestamp) {
	if m.counts == nil {
		m.counts = map[store.Timestamp]int{}
	}
	if m.counts[ts] == 0 {
		heap.Push(&m.h, ts)
	}
	m.counts[ts]++
}

// remove takes one ts out; removing an absent value is a no-op.
func (m *tsMultiset) remove(ts store.Timestamp) {
	c := m.counts[ts]
	if c == 0 {
		return
	}
	if c == 1 {
		delete(m.counts, ts)
		return
	}
	m.counts[ts] = c - 1
}

// min returns the smallest timestamp, and false if the set is empty.
func (m *tsMultiset) min() (store.Timestamp, bool) {
	for len(m.h) > 0 {
		if m.counts[m.h[0]] > 0 {
			return m.h[0], true
		}
		heap.Pop(&m.h)
	}
	return 0, false
}

type tsHeap []store.Timestamp

func (h tsHeap) Len() int           { return len(h) }
func (h tsHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h tsHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tsHeap) Push(x any)        { *h = append(*h, x.(store.Timestamp)) }
func (h *tsHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// streamMins keeps one tsMultiset per stream.
type streamMins map[string]*tsMultiset

func (s streamMins) add(stream string, ts store.Timestamp) {
	m, ok := s[stream]
	if !ok {
		m = &tsMultiset{}
		s[stream] = m
	}
	m.add(ts)
}

func (s streamMins) remove(stream string, ts store.Timestamp) {
	if m, ok := s[stream]; ok {
		m.remove(ts)
	}
}

// mins returns the smallest timestamp per non-empty stream.
func (s streamMins) mins() map[string]store.Timestamp {
	out := make(map[string]store.Timestamp, len(s))
	for stream, m := range s {
		if v, ok := m.min(); ok {
			out[stream] = v
		}
	}
	return out
}
