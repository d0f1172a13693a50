package disttest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// steadyLoad writes events to a Counter at a steady rate and reads its
// counts queue as it grows, so that each written batch's latency (written
// → counted) can be taken afterwards: the figures of a handover and of a
// rescale.
type steadyLoad struct {
	t *testing.T
	c *Counter

	mu      sync.Mutex
	written []loadPoint // appended by the writer
	werr    error
	stop    context.CancelFunc
	wg      sync.WaitGroup

	counted []loadPoint // by poll, on the test's goroutine
	next    []uint64
	total   int
}

// loadPoint is a time and the events written (or counted) by then.
type loadPoint struct {
	at time.Time
	n  int
}

// startLoad starts writing rate events/s to c, in batches every 10 ms.
func startLoad(t *testing.T, c *Counter, rate int, seed uint64) *steadyLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &steadyLoad{t: t, c: c, stop: cancel, next: make([]uint64, c.Counts.Partitions())}
	l.wg.Go(func() {
		r := rand.New(rand.NewPCG(seed, 11))
		const tick = 10 * time.Millisecond
		per := max(1, rate/100)
		total := 0
		for next := time.Now(); ctx.Err() == nil; next = next.Add(tick) {
			time.Sleep(time.Until(next))
			if err := c.Write(context.Background(), r, per, 40, per); err != nil {
				l.mu.Lock()
				l.werr = err
				l.mu.Unlock()
				return
			}
			total += per
			l.mu.Lock()
			l.written = append(l.written, loadPoint{time.Now(), total})
			l.mu.Unlock()
		}
	})
	return l
}

// poll reads what was counted since the last poll.
func (l *steadyLoad) poll() {
	for p := range l.next {
		rows, err := l.c.Counts.Read(context.Background(), p, l.next[p], 0)
		if err != nil {
			l.t.Fatal(err)
		}
		if len(rows) > 0 {
			l.next[p] = rows[len(rows)-1].Index + 1
			l.total += len(rows)
		}
	}
	if len(l.counted) == 0 || l.counted[len(l.counted)-1].n != l.total {
		l.counted = append(l.counted, loadPoint{time.Now(), l.total})
	}
}

// pollFor polls every 5 ms for d.
func (l *steadyLoad) pollFor(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		l.poll()
	}
}

// end stops writing.
func (l *steadyLoad) end() {
	l.stop()
	l.wg.Wait()
	if l.werr != nil {
		l.t.Fatal(l.werr)
	}
}

// latencies returns the latency of each batch written in [from, to) that
// was counted while polling.
func (l *steadyLoad) latencies(from, to time.Time) (at []time.Time, lat []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.written {
		if w.at.Before(from) || !w.at.Before(to) {
			continue
		}
		for _, p := range l.counted {
			if p.n >= w.n {
				at, lat = append(at, w.at), append(lat, max(0, p.at.Sub(w.at)))
				break
			}
		}
	}
	return at, lat
}

// worst returns the largest latency of the batches written in [from, to)
// and when it was written.
func (l *steadyLoad) worst(from, to time.Time) (worst time.Duration, when time.Time) {
	at, lat := l.latencies(from, to)
	for i, d := range lat {
		if d > worst {
			worst, when = d, at[i]
		}
	}
	return worst, when
}

// usual returns the median latency of the batches written in [from, to).
func (l *steadyLoad) usual(from, to time.Time) time.Duration {
	_, lat := l.latencies(from, to)
	if len(lat) == 0 {
		return 0
	}
	return median(lat)
}
