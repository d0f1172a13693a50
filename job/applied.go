package job

import (
	"sync"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/invariants"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// appliedLog checks, when invariants are enabled, that an exactly_once
// Transform partition never applies an input message twice within the
// dedup horizon (inputs at or above the input SystemWatermark): every
// committed epoch records the ids it applied, and an id seen again is a
// violated invariant. It spans the jobs of a partition in one process (a
// replacement job, a zombie), keyed by the store instance so that tests
// reusing message ids on other stores do not collide. Entries below the
// stream's watermark are dropped: the watermark filter covers them.
type appliedLog struct {
	mu     sync.Mutex
	parts  map[appliedKey]map[msgid.ID]appliedEntry
	ignore map[store.Store]bool
}

type appliedKey struct {
	st        store.Store
	partition string
}

type appliedEntry struct {
	stream string
	ts     store.Timestamp
}

var applied = appliedLog{parts: map[appliedKey]map[msgid.ID]appliedEntry{}, ignore: map[store.Store]bool{}}

// IgnoreAppliedChecks turns the applied-twice invariant off for jobs
// committing to st. Only the fault harness's sabotage runs use it: they
// break a fence on purpose to prove that the checkers notice, and the
// invariant would stop the process first.
func IgnoreAppliedChecks(st store.Store) {
	applied.mu.Lock()
	defer applied.mu.Unlock()
	applied.ignore[st] = true
}

// record notes the inputs an epoch of partition p committed and checks that
// none was applied before. wms are the input SystemWatermarks the epoch used.
func (l *appliedLog) record(st store.Store, p string, msgs []*weir.Message, wms map[string]store.Timestamp) {
	if !invariants.Enabled {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ignore[st] {
		return
	}
	k := appliedKey{st, p}
	ids := l.parts[k]
	if ids == nil {
		ids = map[msgid.ID]appliedEntry{}
		l.parts[k] = ids
	}
	for id, e := range ids {
		if e.ts < wms[e.stream] {
			delete(ids, id)
		}
	}
	for _, m := range msgs {
		_, seen := ids[m.ID]
		invariants.Check(!seen, "partition %s applied input %s twice", p, m.ID)
		ids[m.ID] = appliedEntry{stream: m.Stream, ts: m.SystemTimestamp}
	}
}
