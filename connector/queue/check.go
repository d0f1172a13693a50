package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// CheckReport is what Check verified.
type CheckReport struct {
	Queues, Rows int
}

// Check verifies the invariants of every queue in st (see the layout in the
// package comment) and calls problem for each violation:
//
//   - every queue's metadata decodes;
//   - every row belongs to an existing queue, in a partition below its
//     partition count;
//   - each partition's row indexes are dense, 0, 1, 2, … with no gap or
//     repeat ($row_index is the row's position), its timestamps strictly
//     increase, and every row decodes;
//   - every consumer offset lies within its partition (at most its length);
//   - every producer and consumer belongs to an existing queue.
//
// It reads the whole queue tables; err is for reads that failed.
func Check(ctx context.Context, st store.Store, problem func(string)) (CheckReport, error) {
	var rep CheckReport
	queues := map[string]int{}
	err := st.Scan(ctx, store.Range{Table: store.Queues}, func(k, v []byte) bool {
		n, err := decodeMeta(v)
		if err != nil {
			problem(fmt.Sprintf("queue %q: metadata: %v", k, err))
			return true
		}
		queues[string(k)] = n
		return true
	})
	if err != nil {
		return rep, err
	}
	rep.Queues = len(queues)

	lens := map[string][]uint64{} // queue -> next index per partition
	for name, n := range queues {
		lens[name] = make([]uint64, n)
	}
	var (
		cur     []byte // name 0x00 BE32(p) of the partition being read
		next    uint64
		lastTS  uint64
		skipped = map[string]bool{}
	)
	err = st.Scan(ctx, store.Range{Table: store.QueueRows}, func(k, v []byte) bool {
		rep.Rows++
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+1+4+8 {
			problem(fmt.Sprintf("queue_rows: malformed key %q", k))
			return true
		}
		name, p, idx := string(k[:i]), int(binary.BigEndian.Uint32(k[i+1:])), binary.BigEndian.Uint64(k[i+5:])
		n, ok := queues[name]
		if !ok || p >= n {
			where := fmt.Sprintf("queue %q partition %d", name, p)
			if !skipped[where] {
				skipped[where] = true
				if !ok {
					problem(fmt.Sprintf("%s: rows of a queue that does not exist", where))
				} else {
					problem(fmt.Sprintf("%s: rows beyond the queue's %d partitions", where, n))
				}
			}
			return true
		}
		if !bytes.Equal(k[:i+5], cur) {
			cur, next, lastTS = append(cur[:0], k[:i+5]...), 0, 0
		}
		if idx != next {
			problem(fmt.Sprintf("queue %q partition %d: row index %d where %d belongs: rows %s", name, p, idx, next, gap(next, idx)))
		}
		next = idx + 1
		lens[name][p] = next
		if len(v) < 8 {
			problem(fmt.Sprintf("queue %q partition %d row %d: value of %d bytes, too short", name, p, idx, len(v)))
			return true
		}
		if ts := binary.BigEndian.Uint64(v); ts <= lastTS {
			problem(fmt.Sprintf("queue %q partition %d row %d: $timestamp %d does not increase (previous %d)", name, p, idx, ts, lastTS))
		} else {
			lastTS = ts
		}
		if _, _, err := codec.DecodeRow(v[8:]); err != nil {
			problem(fmt.Sprintf("queue %q partition %d row %d: %v", name, p, idx, err))
		}
		return true
	})
	if err != nil {
		return rep, err
	}

	err = st.Scan(ctx, store.Range{Table: store.Consumers}, func(k, v []byte) bool {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			problem(fmt.Sprintf("consumers: malformed key %q", k))
			return true
		}
		name := string(k[:i])
		l, ok := lens[name]
		if !ok {
			problem(fmt.Sprintf("consumer %q of queue %q, which does not exist", k[i+1:], name))
			return true
		}
		rest := k[i+1:]
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return true // registration marker
		}
		if len(rest) != j+5 || len(v) != 8 {
			problem(fmt.Sprintf("consumer %q of queue %q: malformed offset row", rest[:j], name))
			return true
		}
		p, off := int(binary.BigEndian.Uint32(rest[j+1:])), binary.BigEndian.Uint64(v)
		switch {
		case p >= len(l):
			problem(fmt.Sprintf("consumer %q of queue %q: offset for partition %d, beyond its %d partitions", rest[:j], name, p, len(l)))
		case off > l[p]:
			problem(fmt.Sprintf("consumer %q of queue %q partition %d: offset %d is beyond the %d rows", rest[:j], name, p, off, l[p]))
		}
		return true
	})
	if err != nil {
		return rep, err
	}
	err = st.Scan(ctx, store.Range{Table: store.Producers}, func(k, v []byte) bool {
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(v) != 8 {
			problem(fmt.Sprintf("producers: malformed row %q", k))
		} else if _, ok := queues[string(k[:i])]; !ok {
			problem(fmt.Sprintf("producer %q of queue %q, which does not exist", k[i+1:], k[:i]))
		}
		return true
	})
	return rep, err
}

// gap describes the rows missing (want < got) or repeated between two
// indexes.
func gap(want, got uint64) string {
	if got > want {
		return fmt.Sprintf("%d..%d are missing", want, got-1)
	}
	return "are out of order or repeated"
}
