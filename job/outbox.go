package job

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// outbox is a partition's store of materialized outputs (Flow's output
// store, table partition_output_messages): every output of a Transform that
// still has a destination to reach is written in the epoch's commit, and
// erased in a later commit once every destination has acknowledged it. After
// a restart the undelivered outputs are reloaded and sent again with their
// original ids.
//
// Invariant: an output leaves the outbox (erase written) only after all its
// destinations acknowledged it, and an acknowledgement from a downstream
// computation means the receiver's commit that recorded it is durable.
type outbox struct {
	st        store.Store
	partition string

	// count is the number of undelivered outputs; bytes the size of those
	// among them that are counted (output.counted). unsized holds the
	// outputs added since the last undelivered(): it sizes those still
	// undelivered then.
	count   int
	bytes   int
	unsized []*output
	// erase holds ids delivered since the last commit whose rows exist.
	erase []msgid.ID
	// fresh holds outputs registered in this epoch, in registration order.
	fresh []*output
	// pendingTS tracks the SystemTimestamps of undelivered outputs.
	pendingTS streamMins
	// syncing is set between sync and committed (checked under invariants).
	syncing bool
}

// output is one output message and its delivery progress.
type output struct {
	msg *weir.Message
	// size is tables.MessageSize(msg), computed when first needed (sizeOf;
	// 0: not yet): an output delivered within its epoch — to a sync sink —
	// is never sized. counted says it is in the outbox's bytes.
	size    int
	counted bool
	// remaining counts destinations that have not acknowledged it.
	remaining int
	persisted bool
	delivered bool
	// sinkCalled has a bit per sink of the output's stream whose done
	// callback ran (job.sinkDone).
	sinkCalled atomic.Uint64
	// acked holds the downstream destinations (route indexes) that
	// acknowledged it (job.outputAcked).
	acked ackSet
}

func newOutbox(st store.Store, partition string) *outbox {
	return &outbox{st: st, partition: partition, pendingTS: streamMins{}}
}

// load returns the undelivered outputs persisted by earlier jobs of the
// partition, sorted by id (the order they were first registered in).
func (o *outbox) load(ctx context.Context) ([]*weir.Message, error) {
	p := tables.OutboxPrefix(o.partition)
	var msgs []*weir.Message
	var decodeErr error
	err := o.st.Scan(ctx, store.Range{Table: store.OutputMessages, Lo: p, Hi: tables.PrefixEnd(p)}, func(k, v []byte) bool {
		id := msgid.ID(k[len(p):])
		m, err := tables.DecodeMessage(id, v)
		if err != nil {
			decodeErr = fmt.Errorf("outbox of %s: %w", o.partition, err)
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].ID < msgs[j].ID })
	return msgs, nil
}

// add registers an output with the given number of destinations.
// persisted says whether its row already exists (reloaded after a restart).
func (o *outbox) add(m *weir.Message, dests int, persisted bool) *output {
	out := &output{msg: m, remaining: dests, persisted: persisted}
	o.count++
	o.unsized = append(o.unsized, out)
	o.pendingTS.add(m.Stream, m.SystemTimestamp)
	if !persisted {
		o.fresh = append(o.fresh, out)
	}
	if dests == 0 {
		o.ack(out)
	}
	return out
}

// ack records that one destination acknowledged out.
// REQUIRES: not between sync and committed.
func (o *outbox) ack(out *output) {
	invariants.Check(!o.syncing, "outbox of %s: ack of %s between sync and committed", o.partition, out.msg.ID)
	if out.delivered {
		return
	}
	if out.remaining > 0 {
		out.remaining--
	}
	if out.remaining > 0 {
		return
	}
	out.delivered = true
	o.count--
	if out.counted {
		o.bytes -= out.size
	}
	o.pendingTS.remove(out.msg.Stream, out.msg.SystemTimestamp)
	if out.persisted {
		o.erase = append(o.erase, out.msg.ID)
	}
}

// sync writes this epoch's still-undelivered outputs and erases delivered
// ones. Outputs delivered before the commit (for example to a sync sink,
// which writes inside this very transaction) are never written.
func (o *outbox) sync(txn *store.Txn) error {
	o.syncing = invariants.Enabled
	for _, id := range o.erase {
		txn.Delete(store.OutputMessages, tables.OutboxKey(o.partition, id))
	}
	for _, out := range o.fresh {
		if out.delivered {
			continue
		}
		b, err := tables.AppendMessage(nil, out.msg)
		if err != nil {
			return fmt.Errorf("outbox: output %s: %w", out.msg.ID, err)
		}
		txn.Put(store.OutputMessages, tables.OutboxKey(o.partition, out.msg.ID), b)
	}
	return nil
}

// committed marks the written rows as persisted and the erased ones gone.
// REQUIRES: no ack was applied between sync and committed (acks are applied
// only on the job's goroutine, at fixed points of the epoch).
func (o *outbox) committed() {
	o.syncing = false
	o.erase = o.erase[:0]
	for _, out := range o.fresh {
		if out.delivered {
			continue
		}
		out.persisted = true
	}
	// Cleared, not only cut: the array's tail would keep an earlier,
	// larger epoch's outputs (and their batches) alive.
	clear(o.fresh)
	o.fresh = o.fresh[:0]
}

// undelivered returns the count and bytes of outputs still in flight.
func (o *outbox) undelivered() (int, int) {
	for _, out := range o.unsized {
		if !out.delivered {
			o.bytes += out.sizeOf()
			out.counted = true
		}
	}
	clear(o.unsized)
	o.unsized = o.unsized[:0]
	return o.count, o.bytes
}

// sizeOf returns out's size, computing it once.
func (out *output) sizeOf() int {
	if out.size == 0 {
		out.size = tables.MessageSize(out.msg)
	}
	return out.size
}

// minSystemTimestamp returns the smallest SystemTimestamp of the
// undelivered outputs per stream.
func (o *outbox) minSystemTimestamp() map[string]store.Timestamp {
	return o.pendingTS.mins()
}
