package cli

import (
	"context"
	"sync"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// pipelineLag is the "lag" of weir controller's GET /status: how far the
// pipeline is behind its input, per source partition and per computation.
// A streaming (not finite) pipeline never completes; it has caught up when
// every figure here is 0.
type pipelineLag struct {
	// SourcePartitions maps COMPUTATION@P to the rows of queue partition P
	// that the computation's QueueSource has not committed yet (read from
	// the queue's length and the consumer position the source advances
	// after each epoch commit). Other sources have no entry.
	SourcePartitions map[string]int64 `json:"source_partitions"`
	// Computations maps each computation to its lag.
	Computations map[string]computationLag `json:"computations"`
	// CaughtUp: the pipeline has processed every row its QueueSources
	// hold: an earlier GET /status read them all committed, no row was
	// written since, and every partition of the layout has reported that
	// nothing of it is in flight (board.Status.Quiet) in a status posted
	// after that read. So it turns true at the second poll at the
	// earliest. For other sources it says only the latter.
	CaughtUp bool `json:"caught_up"`
}

// lagWatch remembers, across GET /status calls, when the sources were
// last read all consumed (pipelineLag.CaughtUp).
type lagWatch struct {
	mu     sync.Mutex
	zeroAt time.Time // store clock; zero: the last read found rows
	// written is how many rows the sources held at zeroAt: rows written
	// since then need statuses posted after a read that found them
	// consumed.
	written uint64
}

// computationLag is one computation's lag.
type computationLag struct {
	// Rows: for a computation reading a QueueSource, the rows of its
	// source partitions not committed yet; for one reading one stream, the
	// messages its writer emitted that it has not processed yet (from the
	// cumulative counters: an input processed again after a restart counts
	// again on both sides). Absent when unknown (other sources, several
	// input streams).
	Rows *int64 `json:"rows,omitempty"`
	// Seconds is how far the SystemWatermark of its input streams trails
	// the newest epoch of the pipeline (computations reading streams).
	Seconds *float64 `json:"seconds,omitempty"`
}

// lagOf computes the lag of pipeline p from the store (queue lengths and
// consumer positions) and the active controller's layout and board.
func (lw *lagWatch) lagOf(ctx context.Context, st store.Store, p *spec.Pipeline, parts []controller.PartitionStatus, b *board.Board) pipelineLag {
	lags, written := queueSourceLags(ctx, st, p)
	out := pipelineLag{SourcePartitions: lags, Computations: map[string]computationLag{}}
	readAt := st.Now()
	counters, statuses := b.Counters(), b.Statuses()
	var newest store.Timestamp
	for _, s := range statuses {
		newest = max(newest, s.Epoch)
	}
	writer := map[string]string{}
	for _, name := range sortedNames(p.Computations) {
		for _, s := range p.Computations[name].OutputStreamIDs {
			writer[s] = name
		}
	}
	consumed := true
	for _, n := range out.SourcePartitions {
		consumed = consumed && n == 0
	}
	for _, name := range sortedNames(p.Computations) {
		c := p.Computations[name]
		var l computationLag
		if len(c.SourceStreams) > 0 {
			var rows int64
			known := true
			for _, src := range c.SourceStreams {
				known = known && src.SourceClassName == "QueueSource"
			}
			for id, n := range out.SourcePartitions {
				if partitionComputation(id) == name {
					rows += n
				}
			}
			if known {
				l.Rows = &rows
			}
		}
		if ins := c.InputStreamIDs; len(ins) > 0 {
			if w, ok := writer[ins[0]]; ok && len(ins) == 1 && len(c.SourceStreams) == 0 {
				wc, rc := counters[w], counters[name]
				rows := max(int64(wc.Outputs)-int64(rc.Inputs+rc.Duplicates), 0)
				l.Rows = &rows
			}
			wms := b.Control(name).InputSystemWM
			if len(wms) > 0 && newest != 0 {
				least := store.Timestamp(0)
				for _, s := range ins {
					if wm, ok := wms[s]; ok && (least == 0 || wm < least) {
						least = wm
					}
				}
				if least != 0 {
					d := max(0, newest.Time().Sub(least.Time()).Seconds())
					l.Seconds = &d
				}
			}
		}
		out.Computations[name] = l
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !consumed {
		lw.zeroAt = time.Time{}
		return out
	}
	since := lw.zeroAt
	if since.IsZero() || written != lw.written {
		lw.zeroAt, lw.written = readAt, written
		return out
	}
	out.CaughtUp = len(parts) > 0
	for _, ps := range parts {
		s, ok := statuses[ps.Partition]
		if !ok || !s.Quiet || s.At.Before(since) {
			out.CaughtUp = false
			break
		}
	}
	return out
}
