package tables

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// Skipped messages: an operator's decision that one input message of a
// computation is not to be processed (`weir pipeline skip`), recorded in
// flow_state so that it holds for every job of the computation, in every
// later run, on every worker:
//
//	"skip/" computation 0x00 identity → JSON SkipRecord
//
// The identity of a message read from an internal stream is its id, stable
// across retries (it is committed in the sender's outbox). A source
// record's id carries the timestamp of the epoch that read it, which
// changes at every retry, so a source record is named by its source
// partition and offset instead.
//
// A job loads the records of its computation when it starts; a partition
// failing on a poison message restarts (with backoff) and so picks up a
// skip recorded meanwhile. The skipped message is consumed like any other —
// its dedup row or the source position moves in the epoch's commit — but
// user code never sees it; with a dead-letter stream it becomes a dead
// letter saying it was skipped.

// skipPrefix starts every skip record's key.
const skipPrefix = "skip/"

// SkipRecord is the value of a skip record.
type SkipRecord struct {
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// MessageIdentity names a message of an internal stream for a skip.
func MessageIdentity(id msgid.ID) string { return "id:" + string(id) }

// SourceIdentity names the record at offset of a source partition.
func SourceIdentity(sourcePartition string, offset uint64) string {
	return "source:" + strconv.FormatUint(offset, 10) + ":" + sourcePartition
}

func skipKey(comp, identity string) []byte {
	return []byte(skipPrefix + comp + "\x00" + identity)
}

// RecordSkip records that comp is to skip the message named identity. It
// reports whether the message was already skipped (the record is then
// left as it was): one commit that requires the record to be absent.
func RecordSkip(ctx context.Context, st store.Store, comp, identity, reason string, now time.Time) (already bool, err error) {
	if comp == "" || strings.ContainsRune(comp, 0) {
		return false, fmt.Errorf("skip: computation name %q is empty or holds a NUL byte", comp)
	}
	key := skipKey(comp, identity)
	v, err := json.Marshal(SkipRecord{Reason: reason, At: now.UTC()})
	if err != nil {
		return false, err
	}
	txn := store.NewTxn()
	txn.CheckAbsent(store.FlowState, key)
	txn.Put(store.FlowState, key, v)
	if err := st.Commit(ctx, txn); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return true, nil // the record exists (the check refused the commit)
		}
		return false, fmt.Errorf("skip: record: %w", err)
	}
	return false, nil
}

// LoadSkips returns comp's skip records by identity (nil if it has none).
func LoadSkips(ctx context.Context, st store.Store, comp string) (map[string]SkipRecord, error) {
	lo := []byte(skipPrefix + comp + "\x00")
	var out map[string]SkipRecord
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.FlowState, Lo: lo, Hi: PrefixEnd(lo)}, func(k, v []byte) bool {
		var r SkipRecord
		if err := json.Unmarshal(v, &r); err != nil {
			derr = fmt.Errorf("skip record %q: %w", k, err)
			return false
		}
		if out == nil {
			out = map[string]SkipRecord{}
		}
		out[string(k[len(lo):])] = r
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}
