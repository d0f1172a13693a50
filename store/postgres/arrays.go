package postgres

import (
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// The store sends a commit's rows as array parameters (keys, values,
// sequence positions: a few elements per row written), in the binary
// format. pgx encodes an array element by element through its generic
// plans — boxing each element in an interface, reflecting on its type,
// planning its encoding — which measured 4% of a worker's CPU on the
// counter example. fastArrays encodes the plain Go slices the store passes
// ([][]byte, []int32, []int64, []bool) straight into the wire format and
// leaves every other value, and decoding, to pgx's codec.
//
// The wire format (PostgreSQL's array_recv): the number of dimensions (0
// for an empty array is also accepted; pgx sends one dimension of length
// 0, and so does this), a has-nulls flag, the element type's OID, per
// dimension its length and lower bound (1), then per element its length
// (-1: NULL) and bytes. A nil slice is NULL, a nil []byte element is a
// NULL element, as pgx encodes them.

// fastArrayTypes are the array types fastArrays takes over: their OID and
// element OID.
var fastArrayTypes = []struct{ oid, elem uint32 }{
	{pgtype.ByteaArrayOID, pgtype.ByteaOID},
	{pgtype.Int4ArrayOID, pgtype.Int4OID},
	{pgtype.Int8ArrayOID, pgtype.Int8OID},
	{pgtype.BoolArrayOID, pgtype.BoolOID},
}

// registerFastArrays installs fastArrayCodec for the array types of
// fastArrayTypes in m (a connection's type map, before its first query).
func registerFastArrays(m *pgtype.Map) {
	for _, a := range fastArrayTypes {
		t, ok := m.TypeForOID(a.oid)
		if !ok {
			continue
		}
		if _, done := t.Codec.(fastArrayCodec); done {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: fastArrayCodec{Codec: t.Codec, elem: a.elem}})
	}
}

// fastArrayCodec is pgx's codec of an array type (embedded: every method
// but PlanEncode is its) with a direct binary encoder for the element
// type's plain Go slice.
type fastArrayCodec struct {
	pgtype.Codec
	elem uint32
}

// PlanEncode implements pgtype.Codec.
func (c fastArrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode && fastElem(value) == c.elem {
		return fastArrayPlan{elem: c.elem}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// fastElem returns the element OID of the plain slices fastArrayPlan
// encodes, 0 for any other value.
func fastElem(value any) uint32 {
	switch value.(type) {
	case [][]byte:
		return pgtype.ByteaOID
	case []int32:
		return pgtype.Int4OID
	case []int64:
		return pgtype.Int8OID
	case []bool:
		return pgtype.BoolOID
	}
	return 0
}

// fastArrayPlan encodes one of the slices fastArrayCodec.PlanEncode
// accepted for its element type.
type fastArrayPlan struct{ elem uint32 }

// Encode implements pgtype.EncodePlan: nil (NULL) for a nil slice.
func (p fastArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	switch v := value.(type) {
	case [][]byte:
		if v == nil {
			return nil, nil
		}
		n := 0
		for _, b := range v {
			n += 4 + len(b)
		}
		buf, nulls := p.header(buf, len(v), n)
		for _, b := range v {
			if b == nil {
				buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // -1: NULL
				binary.BigEndian.PutUint32(buf[nulls:], 1)
				continue
			}
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
			buf = append(buf, b...)
		}
		return buf, nil
	case []int32:
		if v == nil {
			return nil, nil
		}
		buf, _ = p.header(buf, len(v), 8*len(v))
		for _, x := range v {
			buf = binary.BigEndian.AppendUint32(buf, 4)
			buf = binary.BigEndian.AppendUint32(buf, uint32(x))
		}
		return buf, nil
	case []int64:
		if v == nil {
			return nil, nil
		}
		buf, _ = p.header(buf, len(v), 12*len(v))
		for _, x := range v {
			buf = binary.BigEndian.AppendUint32(buf, 8)
			buf = binary.BigEndian.AppendUint64(buf, uint64(x))
		}
		return buf, nil
	case []bool:
		if v == nil {
			return nil, nil
		}
		buf, _ = p.header(buf, len(v), 5*len(v))
		for _, x := range v {
			var b byte
			if x {
				b = 1
			}
			buf = append(binary.BigEndian.AppendUint32(buf, 1), b)
		}
		return buf, nil
	}
	// Unreachable: PlanEncode plans only the types above.
	return nil, fmt.Errorf("postgres store: array encoder given a %T", value)
}

// header appends the header of a one-dimensional array of n elements
// (their encodings taking body bytes, grown for at once) and returns
// where its has-nulls flag is.
func (p fastArrayPlan) header(buf []byte, n, body int) ([]byte, int) {
	if need := len(buf) + 20 + body; need > cap(buf) {
		buf = append(make([]byte, 0, need), buf...)
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	nulls := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0) // has nulls: patched
	buf = binary.BigEndian.AppendUint32(buf, p.elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	return buf, nulls
}
