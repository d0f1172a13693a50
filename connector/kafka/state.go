package kafka

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
)

// KafkaSink's persisted state (Flow's TKafkaSinkState next to the ordered
// async sink's state), version 1:
//
//	version byte (1)
//	bytes: the OrderedAsyncSink state, as the base encodes it
//	uvarint: max_distributed_seq_no, the write-ahead bound
//
// The base encodes its own state; the sink wraps the SinkContext the base
// sees so that the base's bytes travel inside this envelope.
const sinkStateVersion = 1

func encodeSinkState(base []byte, bound connector.SeqNo) []byte {
	b := []byte{sinkStateVersion}
	b = codec.AppendBytes(b, base)
	return codec.AppendUvarint(b, uint64(bound))
}

func decodeSinkState(b []byte) (base []byte, bound connector.SeqNo, err error) {
	if len(b) == 0 || b[0] != sinkStateVersion {
		return nil, 0, errors.New("unknown kafka sink state version")
	}
	base, rest, err := codec.Bytes(b[1:])
	if err != nil {
		return nil, 0, fmt.Errorf("kafka sink state: %w", err)
	}
	v, _, err := codec.Uvarint(rest)
	if err != nil {
		return nil, 0, fmt.Errorf("kafka sink state: %w", err)
	}
	return append([]byte(nil), base...), connector.SeqNo(v), nil
}

// baseStateVersion is the version of connector.OrderedAsyncSink's state
// encoding that decodeBaseState reads: version byte, producer id (codec
// string), max persisted message id (codec string), max persisted seqNo
// (uvarint). The sink needs the persisted id and seqNo to mirror the
// base's seqNo assignment and to check the progress marker; the base does
// not export them. A different version stops the sink at Init rather than
// guessing (TestBaseStateMirror guards the format).
const baseStateVersion = 1

func decodeBaseState(b []byte) (loadedState, error) {
	if len(b) == 0 || b[0] != baseStateVersion {
		return loadedState{}, errors.New("unknown ordered async sink state version (the kafka sink must learn the new format)")
	}
	p, rest, err := codec.String(b[1:])
	if err != nil {
		return loadedState{}, fmt.Errorf("async sink state: %w", err)
	}
	id, rest, err := codec.String(rest)
	if err != nil {
		return loadedState{}, fmt.Errorf("async sink state: %w", err)
	}
	seq, _, err := codec.Uvarint(rest)
	if err != nil {
		return loadedState{}, fmt.Errorf("async sink state: %w", err)
	}
	return loadedState{producer: connector.ProducerID(p), persistID: msgid.ID(id), persistSeq: connector.SeqNo(seq)}, nil
}
