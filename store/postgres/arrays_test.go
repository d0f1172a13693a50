package postgres

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// arrayValues are the parameters the fast encoder must encode as pgx does:
// nil (NULL), empty, NULL and empty elements, large values.
var arrayValues = []struct {
	oid   uint32
	value any
}{
	{pgtype.ByteaArrayOID, [][]byte(nil)},
	{pgtype.ByteaArrayOID, [][]byte{}},
	{pgtype.ByteaArrayOID, [][]byte{[]byte("a"), {}, nil, bytes.Repeat([]byte{0xff}, 70000)}},
	{pgtype.Int4ArrayOID, []int32(nil)},
	{pgtype.Int4ArrayOID, []int32{}},
	{pgtype.Int4ArrayOID, []int32{0, 1, -1, 1 << 30, -1 << 31}},
	{pgtype.Int8ArrayOID, []int64{0, -1, 1 << 62, -1 << 63}},
	{pgtype.Int8ArrayOID, []int64(nil)},
	{pgtype.BoolArrayOID, []bool{true, false, true}},
	{pgtype.BoolArrayOID, []bool{}},
}

// TestFastArraysEncodeAsPgx: the store's array encoder writes the bytes
// pgx's generic one writes, for every type it takes over, and leaves other
// values to pgx.
func TestFastArraysEncodeAsPgx(t *testing.T) {
	fast, plain := pgtype.NewMap(), pgtype.NewMap()
	registerFastArrays(fast)
	for _, c := range arrayValues {
		if _, ok := fast.PlanEncode(c.oid, pgtype.BinaryFormatCode, c.value).(fastArrayPlan); !ok {
			t.Fatalf("%T: not planned by the fast encoder", c.value)
		}
		want, err := plain.Encode(c.oid, pgtype.BinaryFormatCode, c.value, []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fast.Encode(c.oid, pgtype.BinaryFormatCode, c.value, []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("%T %v:\n got %x\nwant %x", c.value, c.value, got, want)
		}
	}
	// Another Go type of the same array type: pgx's codec.
	if _, ok := fast.PlanEncode(pgtype.Int4ArrayOID, pgtype.BinaryFormatCode, []int16{1}).(fastArrayPlan); ok {
		t.Fatal("[]int16 planned by the fast encoder")
	}
	got, err := fast.Encode(pgtype.Int4ArrayOID, pgtype.BinaryFormatCode, []int16{1, 2}, nil)
	want, _ := plain.Encode(pgtype.Int4ArrayOID, pgtype.BinaryFormatCode, []int16{1, 2}, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("[]int16: %x, %v; want %x", got, err, want)
	}
}

// TestFastArraysAllocs bounds the allocations of encoding a commit's
// arrays of 1000 rows: pgx's generic encoder boxed every element (about
// 2,000 allocations for these three arrays).
func TestFastArraysAllocs(t *testing.T) {
	m := pgtype.NewMap()
	registerFastArrays(m)
	vals := make([][]byte, 1000)
	pos := make([]int32, 1000)
	for i := range vals {
		vals[i], pos[i] = bytes.Repeat([]byte{byte(i)}, 100), int32(i)*1000
	}
	buf := make([]byte, 0, 1<<20)
	allocs := testing.AllocsPerRun(20, func() {
		b, _ := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, vals, buf[:0])
		b, _ = m.Encode(pgtype.Int4ArrayOID, pgtype.BinaryFormatCode, pos, b)
		m.Encode(pgtype.Int4ArrayOID, pgtype.BinaryFormatCode, pos, b)
	})
	if allocs > 10 {
		t.Fatalf("%.0f allocations to encode 3 arrays of 1000 elements, want at most 10", allocs)
	}
}

// TestFastArraysOnServer: the store's connections use the fast encoder,
// and the server reads its arrays as the values sent (NULLs, empties,
// large elements): each comes back equal.
func TestFastArraysOnServer(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := context.Background()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, ok := c.Conn().TypeMap().PlanEncode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, [][]byte{}).(fastArrayPlan); !ok {
		t.Fatal("the store's connections do not use the fast array encoder")
	}
	cast := map[uint32]string{pgtype.ByteaArrayOID: "bytea[]", pgtype.Int4ArrayOID: "int[]", pgtype.Int8ArrayOID: "bigint[]", pgtype.BoolArrayOID: "boolean[]"}
	for _, v := range arrayValues {
		back := reflect.New(reflect.TypeOf(v.value))
		if err := c.QueryRow(ctx, "SELECT $1::"+cast[v.oid], v.value).Scan(back.Interface()); err != nil {
			t.Fatalf("%T %v: %v", v.value, v.value, err)
		}
		if got := back.Elem().Interface(); !reflect.DeepEqual(got, v.value) {
			t.Fatalf("sent %T %v, the server returned %v", v.value, v.value, got)
		}
	}
}
