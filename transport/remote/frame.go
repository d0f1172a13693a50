package remote

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
	"github.com/weir-stream/weir/transport"
)

// frameVersion is the first byte of every frame this build writes. Version
// 2 added a pushed message's Origin (flagOrigin); version 1 frames (a
// build before it) are still read.
const frameVersion = 2

// pushFrame is a batch of one channel's messages: from one job life of the
// sending partition to one job life of the receiving partition, in the
// order the sender offered them.
type pushFrame struct {
	From, To           transport.PartitionID
	FromLease, ToLease store.LeaseID
	Msgs               []pushed
}

// pushed is one message of a push frame.
type pushed struct {
	Msg      *weir.Message
	Size     int
	MaybeDup bool
	// Ordered: the sending life promised ordered channels
	// (Delivery.Ordered).
	Ordered bool
	// Origin is the offer's Origin (transport.Offer): the sub-channel
	// (sender, Origin) is ordered whatever Ordered says.
	Origin transport.PartitionID
}

// Flags of a pushed message.
const (
	flagMaybeDup byte = 1 << iota
	flagOrdered
	// flagOrigin: the origin follows the flags (frame version 2).
	flagOrigin
)

// MarshalBinary implements encoding.BinaryMarshaler.
func (f *pushFrame) MarshalBinary() ([]byte, error) {
	// One allocation for the frame: a message's Size (tables.MessageSize,
	// its in-memory estimate) is above its encoded length, so this bound
	// is rarely exceeded; growing a 256-message frame by appends copied it
	// about ten times.
	n := 32 + len(f.From) + len(f.To)
	for _, m := range f.Msgs {
		n += 16 + len(m.Msg.ID) + len(m.Origin) + m.Size
	}
	b := append(make([]byte, 0, n), frameVersion)
	b = codec.AppendString(b, string(f.From))
	b = codec.AppendString(b, string(f.To))
	b = codec.AppendUvarint(b, uint64(f.FromLease))
	b = codec.AppendUvarint(b, uint64(f.ToLease))
	b = codec.AppendUvarint(b, uint64(len(f.Msgs)))
	var err error
	for _, m := range f.Msgs {
		b = codec.AppendString(b, string(m.Msg.ID))
		b = codec.AppendUvarint(b, uint64(m.Size))
		var flags byte
		if m.MaybeDup {
			flags |= flagMaybeDup
		}
		if m.Ordered {
			flags |= flagOrdered
		}
		if m.Origin != "" {
			flags |= flagOrigin
		}
		b = append(b, flags)
		if m.Origin != "" {
			b = codec.AppendString(b, string(m.Origin))
		}
		n := len(b)
		b = append(b, 0, 0, 0, 0) // length of the record, patched below
		if b, err = tables.AppendMessage(b, m.Msg); err != nil {
			return nil, fmt.Errorf("remote: encode message %s: %w", m.Msg.ID, err)
		}
		l := len(b) - n - 4
		b[n], b[n+1], b[n+2], b[n+3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (f *pushFrame) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || (b[0] != frameVersion && b[0] != 1) {
		return fmt.Errorf("remote: push frame: unknown version %d (this build reads 1 and %d)", firstByte(b), frameVersion)
	}
	r := tables.Reader{B: b[1:]}
	f.From = transport.PartitionID(r.Str())
	f.To = transport.PartitionID(r.Str())
	f.FromLease = store.LeaseID(r.Uvarint())
	f.ToLease = store.LeaseID(r.Uvarint())
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B)) {
		return fmt.Errorf("remote: push frame claims %d messages in %d bytes", n, len(r.B))
	}
	f.Msgs = make([]pushed, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		id := msgid.ID(r.Str())
		size := int(r.Uvarint())
		if r.Err != nil || len(r.B) < 5 {
			return errors.New("remote: push frame truncated")
		}
		flags := r.B[0]
		r.B = r.B[1:]
		var origin transport.PartitionID
		if flags&flagOrigin != 0 {
			if origin = transport.PartitionID(r.Str()); r.Err != nil || origin == "" {
				return errors.New("remote: push frame: malformed origin")
			}
		}
		if len(r.B) < 4 {
			return errors.New("remote: push frame truncated")
		}
		l := int(r.B[0])<<24 | int(r.B[1])<<16 | int(r.B[2])<<8 | int(r.B[3])
		r.B = r.B[4:]
		if l > len(r.B) {
			return errors.New("remote: push frame truncated")
		}
		m, err := tables.DecodeMessage(id, r.B[:l])
		if err != nil {
			return fmt.Errorf("remote: push frame: %w", err)
		}
		r.B = r.B[l:]
		f.Msgs = append(f.Msgs, pushed{Msg: m, Size: size, MaybeDup: flags&flagMaybeDup != 0, Ordered: flags&flagOrdered != 0, Origin: origin})
	}
	if r.Err != nil {
		return fmt.Errorf("remote: push frame: %w", r.Err)
	}
	return nil
}

// Reply codes of an ack frame.
const (
	// replyAck: IDs were durably processed (or found processed) by the
	// receiving job.
	replyAck byte = iota
	// replyFenced: the sending life is superseded (a newer lease of its
	// partition is known): it must never send on this channel again.
	replyFenced
	// replyRetry: not now — the receiving life is not (or no longer) here,
	// or the receiver does not know the sender's lease yet. The sender
	// waits for new routes and sends again from its oldest unacknowledged
	// message.
	replyRetry
)

// ackFrame is the receiver's answer on a push stream.
type ackFrame struct {
	Code byte
	IDs  []msgid.ID
	// Reason explains a retry or a fence (for logs).
	Reason string
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (a *ackFrame) MarshalBinary() ([]byte, error) {
	n := 16 + len(a.Reason)
	for _, id := range a.IDs {
		n += 2 + len(id)
	}
	b := append(make([]byte, 0, n), frameVersion, a.Code)
	b = codec.AppendString(b, a.Reason)
	b = codec.AppendUvarint(b, uint64(len(a.IDs)))
	for _, id := range a.IDs {
		b = codec.AppendString(b, string(id))
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (a *ackFrame) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] != frameVersion {
		return errors.New("remote: ack frame: unknown version")
	}
	a.Code = b[1]
	r := tables.Reader{B: b[2:]}
	a.Reason = r.Str()
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B)) {
		return fmt.Errorf("remote: ack frame claims %d ids in %d bytes", n, len(r.B))
	}
	a.IDs = make([]msgid.ID, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		a.IDs = append(a.IDs, msgid.ID(r.Str()))
	}
	if r.Err != nil {
		return fmt.Errorf("remote: ack frame: %w", r.Err)
	}
	return nil
}

// firstByte is b's first byte (0 if empty), for errors.
func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
