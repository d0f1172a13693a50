package statictable

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// The spool: the rows of a sink partition's open table, in the pipeline's
// store (catalogTable), one row per message under "spool/<sink>/<partition>"
// followed by the message id (ids order as strings, so the spool scans in
// id order). A row is written in the epoch transaction after the message
// was added to the open table (Sync), so it is durable exactly when that
// epoch commits — and fenced by the job's lease like every epoch write: a
// replaced job's zombie cannot add to it. Once spooled, a message needs the
// computation's outbox no more and is acknowledged after that commit: the
// outbox (in memory and in the store) holds the outputs of about one epoch
// instead of a whole open table. Publishing a table reads its rows back
// from the spool; the next Sync deletes them (a range deletion).
//
// Value: uvarint SystemTimestamp, uvarint data weight, then the payload
// (codec row).

func spoolPrefix(path, part string) []byte {
	return codec.AppendString(codec.AppendString([]byte("spool/"), path), part)
}

// spoolPrefix is the partition's spool prefix (set by Init).
func (s *Sink) spoolPrefix() []byte { return s.spool }

func (s *Sink) spoolKey(id msgid.ID) []byte {
	return append(append(make([]byte, 0, len(s.spool)+len(id)+1), s.spool...), id...)
}

// spoolThrough is the end of the spool's range holding the ids at or
// below id: the smallest key above id's.
func (s *Sink) spoolThrough(id msgid.ID) []byte { return append(s.spoolKey(id), 0) }

// appendSpoolRows appends the spool keys and values of rows to buf (one
// block for an epoch's rows: the transaction keeps the slices) and puts
// them into txn.
func (s *Sink) appendSpoolRows(txn *store.Txn, rows []*pending) error {
	var buf []byte
	for _, p := range rows {
		if cap(buf)-len(buf) < len(s.spool)+len(p.msg.ID)+64 {
			buf = make([]byte, 0, max(64<<10, 2*(len(s.spool)+len(p.msg.ID)+64)))
		}
		start := len(buf)
		buf = append(append(buf, s.spool...), p.msg.ID...)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = binary.AppendUvarint(buf, uint64(p.msg.SystemTimestamp))
		buf = binary.AppendUvarint(buf, uint64(p.weight))
		var err error
		if buf, err = codec.AppendRow(buf, p.msg.Payload); err != nil {
			return fmt.Errorf("%s: spool message %s: %w", s.path, p.msg.ID, err)
		}
		txn.Put(catalogTable, key, buf[start:len(buf):len(buf)])
	}
	return nil
}

// spoolHeader decodes a spool value's SystemTimestamp and weight; rest is
// the payload.
func spoolHeader(v []byte) (ts store.Timestamp, weight int, rest []byte, err error) {
	t, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, 0, nil, errors.New("spooled row: bad timestamp")
	}
	w, m := binary.Uvarint(v[n:])
	if m <= 0 {
		return 0, 0, nil, errors.New("spooled row: bad weight")
	}
	return store.Timestamp(t), int(w), v[n+m:], nil
}

// scanSpool calls fn for each spooled row with an id above after, in id
// order, until fn returns false; payload is nil unless rows (the payload
// is decoded only then).
func (s *Sink) scanSpool(ctx context.Context, after msgid.ID, rows bool, fn func(id msgid.ID, ts store.Timestamp, weight int, payload weir.Row) bool) error {
	prefix := s.spoolPrefix()
	lo := prefix
	if after != "" {
		lo = s.spoolThrough(after)
	}
	var ferr error
	err := s.sc.Store.Scan(ctx, store.Range{Table: catalogTable, Lo: lo, Hi: tables.PrefixEnd(prefix)}, func(k, v []byte) bool {
		id := msgid.ID(k[len(prefix):])
		ts, w, rest, err := spoolHeader(v)
		if err != nil {
			ferr = fmt.Errorf("%w (message %s)", err, id)
			return false
		}
		var row weir.Row
		if rows {
			if row, _, err = codec.DecodeRow(rest); err != nil {
				ferr = fmt.Errorf("spooled row of message %s: %w", id, err)
				return false
			}
		}
		return fn(id, ts, w, row)
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
// above the partition's frontier (those at or below it are in a published
// table; the next Sync deletes them). Messages the outbox hands again
// with ids at or below the spool's last are in it already (Distribute).
func (s *Sink) loadSpool(ctx context.Context) error {
	now := s.now()
	return s.scanSpool(ctx, "", false, func(id msgid.ID, ts store.Timestamp, w int, _ weir.Row) bool {
		s.spoolHigh = id
		if id <= s.base.MessageID {
			s.spoolDrop = id
			return true
		}
		if s.open == nil {
			s.open = &openSlot{slot: s.tableSlot(ts)}
		}
		s.open.rows++
		s.open.weight += int64(w)
		s.open.lastArrival = now
		return true
	})
}
