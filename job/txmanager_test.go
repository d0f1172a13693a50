package job

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/store"
)

// lateStore answers the first commit of every epoch "outcome unknown"
// without applying it, keeps that attempt, and lets the test land it later.
type lateStore struct {
	store.Store
	holdNext bool
	held     []*store.Txn
}

func (s *lateStore) Commit(ctx context.Context, txn *store.Txn) error {
	if s.holdNext {
		s.holdNext = false
		s.held = append(s.held, txn.Clone())
		return &store.AmbiguousError{Err: errors.New("test: the commit is still on its way")}
	}
	return s.Store.Commit(ctx, txn)
}

// TestEveryAttemptIsGuarded: an epoch's first attempt goes unanswered and
// lands only after the epoch was committed again and a later epoch
// committed too. It must be refused: applied, it would move the partition's
// state (here a value written by both epochs) and its
// partition_transactions row back.
func TestEveryAttemptIsGuarded(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ls := &lateStore{Store: openStore(t, clk)}
	lease, err := ls.CreateLease(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m := newTxManager(ls, "P/0", lease, time.Minute, rand.New(rand.NewPCG(1, 2)))
	ts0, _ := ls.Timestamp(ctx)
	if err := m.init(ctx, ts0); err != nil {
		t.Fatal(err)
	}
	epoch := func(value string, hold bool) store.Timestamp {
		t.Helper()
		ts, err := ls.Timestamp(ctx)
		if err != nil {
			t.Fatal(err)
		}
		txn := store.NewTxn(lease)
		txn.Put(store.States, []byte("k"), []byte(value))
		ls.holdNext = hold
		if err := m.commit(ctx, txn, ts); err != nil {
			t.Fatalf("epoch %s: %v", value, err)
		}
		return ts
	}
	epoch("epoch-1", true) // first attempt held; resolved as not applied; retried
	if m.resolvedRetried != 1 {
		t.Fatalf("retries = %d, want 1", m.resolvedRetried)
	}
	ts2 := epoch("epoch-2", false)
	for _, late := range ls.held {
		if err := ls.Store.Commit(ctx, late); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("the late first attempt of epoch 1 landed with %v, want store.ErrConflict", err)
		}
	}
	v, _, err := ls.Get(ctx, store.States, []byte("k"))
	if err != nil || string(v) != "epoch-2" {
		t.Fatalf("state after the late landing = %q, %v; want epoch-2", v, err)
	}
	if got, _ := m.resolve(ctx, ts2); !got {
		t.Fatal("partition_transactions row moved away from epoch 2")
	}
}
