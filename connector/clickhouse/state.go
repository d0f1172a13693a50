package clickhouse

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
)

// planEntry is one planned batch: the messages with ids in (previous
// entry's end, End], Rows of them.
type planEntry struct {
	End  msgid.ID
	Rows uint64
}

// batchState is the persisted partition state of an exactly-once sink,
// version 1:
//
//	version byte (1)
//	string: acked, the end of the last batch recorded as inserted
//	string: topology fingerprint of the plan ("" unsharded)
//	uvarint: number of plan entries, then per entry: string end, uvarint rows
//
// Invariant: the plan lists, in id order, every batch whose messages are
// above acked and that may have been sent; batch k holds exactly the
// messages with ids in (end[k-1], end[k]] (end[-1] = acked). An entry is
// written in the epoch transaction that also writes its messages to the
// outbox (or a later one), before any INSERT of it starts; so a replay
// after any crash forms the same batches from the outbox.
type batchState struct {
	Acked       msgid.ID
	Fingerprint string
	Plan        []planEntry
}

const batchStateVersion = 1

func (st batchState) encode() []byte {
	b := []byte{batchStateVersion}
	b = codec.AppendString(b, string(st.Acked))
	b = codec.AppendString(b, st.Fingerprint)
	b = codec.AppendUvarint(b, uint64(len(st.Plan)))
	for _, e := range st.Plan {
		b = codec.AppendString(b, string(e.End))
		b = codec.AppendUvarint(b, e.Rows)
	}
	return b
}

func decodeBatchState(b []byte) (batchState, error) {
	var st batchState
	if len(b) == 0 || b[0] != batchStateVersion {
		return st, errors.New("unknown ClickHouse sink state version")
	}
	acked, rest, err := codec.String(b[1:])
	if err != nil {
		return st, fmt.Errorf("clickhouse sink state: %w", err)
	}
	fp, rest, err := codec.String(rest)
	if err != nil {
		return st, fmt.Errorf("clickhouse sink state: %w", err)
	}
	n, rest, err := codec.Uvarint(rest)
	if err != nil {
		return st, fmt.Errorf("clickhouse sink state: %w", err)
	}
	st.Acked, st.Fingerprint = msgid.ID(acked), fp
	for i := uint64(0); i < n; i++ {
		var end string
		var rows uint64
		if end, rest, err = codec.String(rest); err != nil {
			return st, fmt.Errorf("clickhouse sink state: plan entry %d: %w", i, err)
		}
		if rows, rest, err = codec.Uvarint(rest); err != nil {
			return st, fmt.Errorf("clickhouse sink state: plan entry %d: %w", i, err)
		}
		st.Plan = append(st.Plan, planEntry{End: msgid.ID(end), Rows: rows})
	}
	return st, nil
}

// startedState is the persisted state of AtMostOnceClickHouseSink in
// ordered mode, version 1: version byte, string acked (every message at or
// below it is done), string started (the write-ahead bound: no INSERT of a
// message above it has started).
type startedState struct {
	Acked, Started msgid.ID
}

const startedStateVersion = 1

func (st startedState) encode() []byte {
	b := []byte{startedStateVersion}
	b = codec.AppendString(b, string(st.Acked))
	return codec.AppendString(b, string(st.Started))
}

func decodeStartedState(b []byte) (startedState, error) {
	if len(b) == 0 || b[0] != startedStateVersion {
		return startedState{}, errors.New("unknown at-most-once ClickHouse sink state version")
	}
	a, rest, err := codec.String(b[1:])
	if err != nil {
		return startedState{}, fmt.Errorf("clickhouse sink state: %w", err)
	}
	s, _, err := codec.String(rest)
	if err != nil {
		return startedState{}, fmt.Errorf("clickhouse sink state: %w", err)
	}
	return startedState{Acked: msgid.ID(a), Started: msgid.ID(s)}, nil
}

// admit applies the ordering rules of the classes that keep messages in the
// outbox: a message at or below acked was handled by an earlier life and is
// acknowledged at once; one not above *last breaks the runtime's id order
// and is refused. Otherwise *last moves to it and admit reports true.
func admit(sinkID string, acked msgid.ID, last *msgid.ID, m *weir.Message, done func(error)) bool {
	if m.ID <= acked {
		done(nil)
		return false
	}
	if m.ID <= *last {
		done(fmt.Errorf("clickhouse sink %s: message id %s is not greater than the last distributed id %s", sinkID, m.ID, *last))
		return false
	}
	*last = m.ID
	return true
}
