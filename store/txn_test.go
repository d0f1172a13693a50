package store

import (
	"slices"
	"testing"
)

// TestTxnRecycle: a recycled transaction is empty (no mutation, check or
// byte of the one before it), names only the new prerequisites, keeps its
// mutation list's capacity, and lets none of the old keys or values stay
// reachable through the spare capacity.
func TestTxnRecycle(t *testing.T) {
	txn := NewTxn(1, 0, 2)
	if got := txn.Prerequisites(); !slices.Equal(got, []LeaseID{1, 2}) {
		t.Fatalf("prerequisites %v, want [1 2] (zero ignored)", got)
	}
	txn.Put("t", []byte("k1"), []byte("v1"))
	txn.Append("q", []byte("p"), []byte("row"))
	txn.CheckAbsent("t", []byte("k2"))
	capacity := txn.Cap()

	txn.Recycle(3)
	if txn.Len() != 0 || txn.Bytes() != 0 || len(txn.Checks()) != 0 {
		t.Fatalf("recycled: %d mutations, %d bytes, %d checks; want none", txn.Len(), txn.Bytes(), len(txn.Checks()))
	}
	if got := txn.Prerequisites(); !slices.Equal(got, []LeaseID{3}) {
		t.Fatalf("prerequisites %v after Recycle(3), want [3]", got)
	}
	if txn.Cap() != capacity {
		t.Fatalf("capacity %d after Recycle, want %d kept", txn.Cap(), capacity)
	}
	for i, m := range txn.Mutations()[:2:2] {
		if m.Key != nil || m.Value != nil || m.Table != "" {
			t.Errorf("spare mutation %d still holds %q %q %q", i, m.Table, m.Key, m.Value)
		}
	}
	txn.Put("t", []byte("k3"), []byte("v3"))
	if ms := txn.Mutations(); len(ms) != 1 || string(ms[0].Key) != "k3" {
		t.Fatalf("after Recycle and one Put: %v, want only k3", ms)
	}
}
