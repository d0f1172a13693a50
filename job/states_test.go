package job

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// TestStateCacheBounded: a job that sees ever new keys keeps at most the
// configured bytes of decoded states cached between epochs; evicted states
// are read again from the store with their committed values.
func TestStateCacheBounded(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	const limit = 8 << 10
	m := newStateManager(st, "C", limit)
	enc := func(v any) ([]byte, error) { return binary.AppendUvarint(nil, v.(uint64)), nil }
	dec := func(b []byte) (any, error) { v, _ := binary.Uvarint(b); return v, nil }
	key := func(i int) weir.Key { return weir.Key{Hash: uint64(i), Encoded: fmt.Sprintf("key-%06d", i)} }
	const keys = 2000
	for epoch := 0; epoch < keys/100; epoch++ {
		txn := store.NewTxn()
		for i := epoch * 100; i < (epoch+1)*100; i++ {
			if _, err := m.load(ctx, key(i), "n", dec); err != nil {
				t.Fatal(err)
			}
			m.store(key(i), "n", uint64(i)+1, false, enc)
		}
		if err := m.sync(txn); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
		m.committed()
		if n, b := m.cached(); b > limit {
			t.Fatalf("epoch %d: %d states cached in %d bytes, above the %d-byte limit", epoch, n, b, limit)
		}
	}
	if n, _ := m.cached(); n >= keys {
		t.Fatalf("%d of %d states still cached", n, keys)
	}
	for _, i := range []int{0, 1, keys / 2, keys - 1} {
		v, err := m.load(ctx, key(i), "n", dec)
		if err != nil || v.(uint64) != uint64(i)+1 {
			t.Fatalf("state of key %d after eviction = %v, %v; want %d", i, v, err, i+1)
		}
	}
}

// TestStateCacheKeepsHotKeys: eviction passes over an entry used since it
// last looked (CLOCK's second chance): a key used in every epoch stays
// cached while ever new keys come and go.
func TestStateCacheKeepsHotKeys(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	m := newStateManager(st, "C", 20*(entryOverhead+16))
	dec := func(b []byte) (any, error) { return nil, nil }
	hot := weir.Key{Hash: 1, Encoded: "hot"}
	for epoch := range 50 {
		if _, err := m.load(ctx, hot, "n", dec); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			k := weir.Key{Hash: uint64(epoch*5 + i + 2), Encoded: fmt.Sprintf("cold-%03d", epoch*5+i)}
			if _, err := m.load(ctx, k, "n", dec); err != nil {
				t.Fatal(err)
			}
		}
		m.committed()
		if _, ok := m.cache[stateRef{"hot", "n"}]; !ok {
			t.Fatalf("epoch %d: the key used in every epoch was evicted", epoch)
		}
		if n, b := m.cached(); b > m.limit {
			t.Fatalf("epoch %d: %d entries in %d bytes, above the limit %d", epoch, n, b, m.limit)
		}
	}
}
