package codec

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestCanonicalIsDecodedForm: Canonical(row) equals what DecodeRow yields
// for row's encoding, so a row means the same in memory and from the store.
func TestCanonicalIsDecodedForm(t *testing.T) {
	rows := []map[string]any{
		{"a": uint32(7), "b": "x"},
		{"a": int(-3), "b": int32(-4), "c": float32(0.1)},
		{"n": []any{uint32(1), map[string]any{"x": int(2)}}, "s": "ok"},
		{"m": map[string]any{"deep": []any{[]any{float32(2.5)}}}},
		{"plain": int64(1), "u": uint64(2), "f": 1.5, "b": []byte("z"), "nil": nil, "t": true},
	}
	for _, row := range rows {
		before, err := AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Canonical(row)
		if err != nil {
			t.Fatal(err)
		}
		dec, _, err := DecodeRow(before)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, dec) {
			t.Errorf("Canonical(%#v) = %#v, decoded %#v", row, got, dec)
		}
		after, err := AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("Canonical changed its input %#v", row)
		}
	}
}

// TestCanonicalKeepsCanonicalRow: an already canonical row is returned as
// is, without allocating.
func TestCanonicalKeepsCanonicalRow(t *testing.T) {
	row := map[string]any{"key": "k1", "n": int64(3), "l": []any{uint64(1)}}
	if got, err := Canonical(row); err != nil || reflect.ValueOf(got).Pointer() != reflect.ValueOf(row).Pointer() {
		t.Fatalf("Canonical copied a canonical row (%v)", err)
	}
	if n := testing.AllocsPerRun(100, func() { Canonical(row) }); n != 0 {
		t.Fatalf("Canonical allocated %v times for a canonical row", n)
	}
}

// TestCanonicalRefusesUnsupported: a type rows cannot hold is refused with
// the encoder's error, naming the column and the path.
func TestCanonicalRefusesUnsupported(t *testing.T) {
	_, err := Canonical(map[string]any{"ok": int32(1), "bad": []any{1.5, uint(3)}})
	var ut *UnsupportedTypeError
	if !errors.As(err, &ut) || ut.Column != "bad" || ut.Path != "[1]" || ut.Type != "uint" {
		t.Fatalf("err = %v (%+v)", err, ut)
	}
}
