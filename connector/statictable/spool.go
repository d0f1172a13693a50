package statictable

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// The spool: the rows of a sink partition's open table, in the pipeline's
// store (catalogTable), under "spool/<sink>/<partition>". Each epoch's Sync
// writes the rows added since the last one as one store row (a batch),
// keyed by the prefix and the batch's last message id (ids order as
// strings, so the spool scans in id order; one row per batch keeps the
// store's work per message small). The batch is written in the epoch
// transaction, so it is durable exactly when that epoch commits — and
// fenced by the job's lease like every epoch write: a replaced job's
// zombie cannot add to it. Once spooled, a message needs the computation's
// outbox no more and is acknowledged after that commit: the outbox (in
// memory and in the store) holds the outputs of about one epoch instead of
// a whole open table. Publishing a table reads its rows back from the
// spool; the next Sync deletes the published batches (a range deletion:
// every batch whose last id is at or below the published frontier).
//
// A batch's value is its rows one after the other, each: the message id
// (codec string), uvarint SystemTimestamp, uvarint data weight, then the
// payload (codec row).

func spoolPrefix(path, part string) []byte {
	return codec.AppendString(codec.AppendString([]byte("spool/"), path), part)
}

func (s *Sink) spoolKey(id msgid.ID) []byte {
	return append(append(make([]byte, 0, len(s.spool)+len(id)+1), s.spool...), id...)
}

// spoolThrough is the end of the spool's range holding the batches whose
// last id is at or below id: the smallest key above id's.
func (s *Sink) spoolThrough(id msgid.ID) []byte { return append(s.spoolKey(id), 0) }

// appendSpoolRows puts rows (in id order) into txn as one batch.
func (s *Sink) appendSpoolRows(txn *store.Txn, rows []*pending) error {
	if len(rows) == 0 {
		return nil
	}
	var buf []byte
	for _, p := range rows {
		buf = codec.AppendString(buf, string(p.msg.ID))
		buf = binary.AppendUvarint(buf, uint64(p.msg.SystemTimestamp))
		buf = binary.AppendUvarint(buf, uint64(p.weight))
		var err error
		if buf, err = codec.AppendRow(buf, p.msg.Payload); err != nil {
			return fmt.Errorf("%s: spool message %s: %w", s.path, p.msg.ID, err)
		}
	}
	txn.Put(catalogTable, s.spoolKey(rows[len(rows)-1].msg.ID), buf)
	return nil
}

// spooledRow is one row of a batch; payload is nil unless decoded.
type spooledRow struct {
	id      msgid.ID
	ts      store.Timestamp
	weight  int
	payload weir.Row
}

// nextSpooled decodes the row at the head of a batch's value b and returns
// the rest; the payload only if rows.
func nextSpooled(b []byte, rows bool, r *spooledRow) ([]byte, error) {
	id, b, err := codec.String(b)
	if err != nil {
		return nil, fmt.Errorf("spooled row: id: %w", err)
	}
	t, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("spooled row %s: bad timestamp", id)
	}
	b = b[n:]
	w, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("spooled row %s: bad weight", id)
	}
	b = b[n:]
	r.id, r.ts, r.weight, r.payload = msgid.ID(id), store.Timestamp(t), int(w), nil
	if rows {
		if r.payload, b, err = codec.DecodeRow(b); err != nil {
			return nil, fmt.Errorf("spooled row %s: %w", id, err)
		}
	} else if b, err = skipRow(b); err != nil {
		return nil, fmt.Errorf("spooled row %s: %w", id, err)
	}
	return b, nil
}

// skipRow returns what follows the codec row at the head of b, by its
// framing (the format byte, then the body's length: internal/codec's
// documentation), without decoding the body: Init counts the spooled rows
// this way, and a corrupt body is found when its table is published.
func skipRow(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("payload: %w", codec.ErrTruncated)
	}
	if b[0] != codec.RowFormatV1 {
		return nil, fmt.Errorf("payload: format byte 0x%02x: %w", b[0], codec.ErrUnknownFormat)
	}
	_, rest, err := codec.Bytes(b[1:])
	return rest, err
}

// scanSpool calls fn for each spooled row with an id above after and at
// or below through, in id order, until fn returns false; the payload is
// decoded only if rows.
func (s *Sink) scanSpool(ctx context.Context, after, through msgid.ID, rows bool, fn func(r *spooledRow) bool) error {
	lo := s.spool
	if after != "" {
		lo = s.spoolThrough(after) // batches ending at or below after hold no such row
	}
	var ferr error
	var r spooledRow
	err := s.sc.Store.Scan(ctx, store.Range{Table: catalogTable, Lo: lo, Hi: tables.PrefixEnd(s.spool)}, func(_, v []byte) bool {
		for len(v) > 0 {
			var err error
			if v, err = nextSpooled(v, rows, &r); err != nil {
				ferr = err
				return false
			}
			if r.id <= after {
				continue
			}
			if r.id > through || !fn(&r) {
				return false
			}
		}
		return true
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("%s: read the open table's spool: %w", s.path, err)
	}
	return nil
}

// loadSpool rebuilds, at Init, the open table from the spool: its rows
// above the partition's frontier (batches at or below it are in published
// tables; the next Sync deletes them). Messages the outbox hands again
// with ids at or below the spool's last are in it already (Distribute).
func (s *Sink) loadSpool(ctx context.Context) error {
	// The spool's last id is its last batch's key.
	err := s.sc.Store.Scan(ctx, store.Range{Table: catalogTable, Lo: s.spool, Hi: tables.PrefixEnd(s.spool), Reverse: true, Limit: 1}, func(k, _ []byte) bool {
		s.spoolHigh = msgid.ID(k[len(s.spool):])
		return false
	})
	if err != nil {
		return fmt.Errorf("%s: read the open table's spool: %w", s.path, err)
	}
	if s.spoolHigh == "" {
		return nil
	}
	if s.spoolHigh <= s.base.MessageID {
		s.spoolDrop = s.spoolHigh
		return nil
	}
	s.spoolDrop = s.base.MessageID // batches at or below it, if any
	now := s.now()
	return s.scanSpool(ctx, s.base.MessageID, s.spoolHigh, false, func(r *spooledRow) bool {
		if s.open == nil {
			s.open = &openSlot{slot: s.tableSlot(r.ts)}
		}
		s.open.rows++
		s.open.weight += int64(r.weight)
		s.open.lastArrival = now
		return true
	})
}
