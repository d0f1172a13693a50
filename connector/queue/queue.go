// Package queue is weir's durable, partitioned, ordered queue, kept in the
// pipeline's store (modelled on YTsaurus queues: ordered tables with
// consumers and producers), and its connectors: QueueSource,
// SyncQueueSink and AsyncQueueSink.
//
// A queue has N partitions (tablets). Each row gets, at commit, its
// $tablet_index, a dense $row_index within its partition, and a $timestamp
// that strictly increases within the partition. Consumers keep committed
// offsets per partition. Producers write with (producer_id,
// $sequence_number): a write repeating a sequence number the queue already
// holds for that producer is dropped, which is what makes AsyncQueueSink's
// retries and restarts exactly-once.
//
// Layout in the store:
//
//	queues     name                                  → meta (partitions)
//	queue_rows name 0x00 BE32(partition) BE64(index) → BE64($timestamp) row
//	consumers  name 0x00 consumer 0x00 BE32(p)       → BE64(next offset)
//	consumers  name 0x00 consumer                    → registration marker
//	producers  name 0x00 producer                    → BE64(last sequence number)
package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/store"
)

// Queue is a handle on one queue.
type Queue struct {
	st         store.Store
	name       string
	partitions int
	// prefixes holds each partition's row key prefix, built once.
	prefixes [][]byte
	// tails is st as a store that knows where its sequences end (nil if
	// it does not: store.SequenceTails), found once.
	tails store.SequenceTails
}

func newQueue(st store.Store, name string, n int) *Queue {
	q := &Queue{st: st, name: name, partitions: n}
	q.tails, _ = st.(store.SequenceTails)
	for p := 0; p < n; p++ {
		q.prefixes = append(q.prefixes, q.makeRowPrefix(p))
	}
	return q
}

// Column names the queue adds to rows it returns.
const (
	ColTabletIndex = "$tablet_index"
	ColRowIndex    = "$row_index"
	ColTimestamp   = "$timestamp"
)

// ErrNotFound: the queue does not exist.
var ErrNotFound = errors.New("queue does not exist")

// ErrExists: a queue of that name exists already.
var ErrExists = errors.New("queue exists already")

// MaxPartitions bounds a queue's partition count. A QueueSource runs one
// job per partition, so the bound is the engine's partition limit
// (spec.MaxPartitionCount).
const MaxPartitions = 4096

// MaxRowBytes is the row size limit of 'weir queue write' (and of the
// admin API's POST /queues/NAME/rows): one line of JSON, without its
// newline, is at most 16 MiB. A write holds all its rows in memory until
// its one commit, so a line is bounded rather than read whole.
const MaxRowBytes = 16 << 20

// ValidName reports whether name can name a queue: 1–200 bytes of
// [A-Za-z0-9_./-], not starting with '/'... any printable byte but 0x00 and
// whitespace would do for the store; the restriction keeps names usable in
// paths and shells.
func ValidName(name string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("queue name %q: must be 1 to 200 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.-/", c) >= 0) {
			return fmt.Errorf("queue name %q: character %q at %d is not allowed (use letters, digits, _ . - /)", name, c, i)
		}
	}
	return nil
}

// Create creates a queue with n partitions.
func Create(ctx context.Context, st store.Store, name string, n int) (*Queue, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxPartitions {
		return nil, fmt.Errorf("queue %s: partition count %d out of range [1, %d] (a source reading the queue runs one job per partition)", name, n, MaxPartitions)
	}
	txn := store.NewTxn()
	txn.CheckAbsent(store.Queues, []byte(name))
	txn.Put(store.Queues, []byte(name), encodeMeta(n))
	if err := st.Commit(ctx, txn); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("queue %s: %w", name, ErrExists)
		}
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	return newQueue(st, name, n), nil
}

// Open opens an existing queue.
func Open(ctx context.Context, st store.Store, name string) (*Queue, error) {
	v, ok, err := st.Get(ctx, store.Queues, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", name, err)
	}
	if !ok {
		return nil, fmt.Errorf("queue %q: %w (create it with: weir queue create --data DIR --partitions N %s; on PostgreSQL, --store URL instead of --data DIR)", name, ErrNotFound, name)
	}
	n, err := decodeMeta(v)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", name, err)
	}
	return newQueue(st, name, n), nil
}

// List returns the names of all queues with their partition counts.
func List(ctx context.Context, st store.Store) (map[string]int, error) {
	out := map[string]int{}
	var derr error
	err := st.Scan(ctx, store.Range{Table: store.Queues}, func(k, v []byte) bool {
		n, err := decodeMeta(v)
		if err != nil {
			derr = err
			return false
		}
		out[string(k)] = n
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Partitions returns the partition count.
func (q *Queue) Partitions() int { return q.partitions }

// Store returns the store holding the queue.
func (q *Queue) Store() store.Store { return q.st }

func (q *Queue) checkPartition(p int) error {
	if p < 0 || p >= q.partitions {
		return fmt.Errorf("queue %s: partition %d out of range [0, %d)", q.name, p, q.partitions)
	}
	return nil
}

func (q *Queue) rowPrefix(p int) []byte {
	if p >= 0 && p < len(q.prefixes) {
		return q.prefixes[p] // never modified: a Txn may keep it
	}
	return q.makeRowPrefix(p)
}

func (q *Queue) makeRowPrefix(p int) []byte {
	b := make([]byte, 0, len(q.name)+5)
	b = append(b, q.name...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(p))
}

// Append adds rows to partition p inside txn (for sinks writing in an epoch
// transaction). Each row's $row_index and $timestamp are assigned at commit.
func (q *Queue) Append(txn *store.Txn, p int, rows ...weir.Row) error {
	if err := q.checkPartition(p); err != nil {
		return err
	}
	vals := make([][]byte, 0, len(rows))
	var buf []byte
	for i, r := range rows {
		var v []byte
		var err error
		if buf, v, err = q.encodeRow(buf, r); err != nil {
			return fmt.Errorf("queue %s: row %d: %w", q.name, i, err)
		}
		vals = append(vals, v)
	}
	txn.Append(store.QueueRows, q.rowPrefix(p), vals...)
	return nil
}

// encodeRow appends r's encoding to buf and returns the grown buffer and
// the row's own slice of it (capacity-limited: later rows never write into
// it, and a Txn may keep it until its commit). Rows encoded into one buffer
// share its few allocations.
func (q *Queue) encodeRow(buf []byte, r weir.Row) ([]byte, []byte, error) {
	if err := checkUserColumns(r); err != nil {
		return buf, nil, err
	}
	start := len(buf)
	buf, err := codec.AppendRow(buf, r)
	if err != nil {
		return buf[:start], nil, err
	}
	return buf, buf[start:len(buf):len(buf)], nil
}

// checkUserColumns rejects rows that set the queue's own columns.
func checkUserColumns(r weir.Row) error {
	for k := range r {
		if strings.HasPrefix(k, "$") {
			return fmt.Errorf("column %q: names starting with $ are reserved for the queue", k)
		}
	}
	return nil
}

// Write appends rows to their partitions in one commit: all rows are
// written or none. parts[i] is row i's partition.
func (q *Queue) Write(ctx context.Context, rows []weir.Row, parts []int) error {
	txn := store.NewTxn()
	if err := q.appendRouted(txn, rows, parts); err != nil {
		return err
	}
	if err := q.st.Commit(ctx, txn); err != nil {
		return fmt.Errorf("write to queue %s: %w", q.name, err)
	}
	return nil
}

// WriteResolvable is Write for a caller that can open the store again
// after a commit whose outcome is unknown (store.ErrAmbiguous: a full disk
// or an I/O error under the commit, which also breaks an embedded store).
// It reads every partition's length first; such a failure then comes back
// as an *UnresolvedWriteError, whose Resolve reads the reopened store and
// tells whether the rows were written, so the caller can say exactly what
// happened instead of guessing.
func (q *Queue) WriteResolvable(ctx context.Context, rows []weir.Row, parts []int) error {
	added := make([]uint64, q.partitions)
	for _, p := range parts {
		if p >= 0 && p < q.partitions {
			added[p]++
		}
	}
	// The lengths of the partitions the write adds to (the others cannot
	// tell whether it landed).
	before := make([]uint64, q.partitions)
	for p := range before {
		if added[p] == 0 {
			continue
		}
		n, err := q.Len(ctx, p)
		if err != nil {
			return fmt.Errorf("write to queue %s: %w", q.name, err)
		}
		before[p] = n
	}
	err := q.Write(ctx, rows, parts)
	if !errors.Is(err, store.ErrAmbiguous) {
		return err
	}
	return &UnresolvedWriteError{Queue: q.name, Rows: len(rows), Before: before, Added: added, Err: err}
}

// UnresolvedWriteError is a WriteResolvable whose commit outcome is
// unknown: all Rows were written, or none.
type UnresolvedWriteError struct {
	Queue string
	Rows  int
	// Added is how many of the rows went to each partition; Before the
	// length before the write of each partition written to (0 for the
	// others, which Resolve does not read).
	Before, Added []uint64
	// Err is the failed commit's error (a *store.AmbiguousError).
	Err error
}

func (e *UnresolvedWriteError) Error() string { return e.Err.Error() }
func (e *UnresolvedWriteError) Unwrap() error { return e.Err }

// Resolve reads the queue in st, a store opened again after the failure
// (read-only is enough), and reports whether the rows were written. It
// fails if the partitions' lengths show neither outcome (another writer
// wrote meanwhile).
func (e *UnresolvedWriteError) Resolve(ctx context.Context, st store.Store) (written bool, err error) {
	q, err := Open(ctx, st, e.Queue)
	if err != nil {
		return false, err
	}
	if q.Partitions() != len(e.Before) {
		return false, fmt.Errorf("queue %s has %d partitions, had %d", e.Queue, q.Partitions(), len(e.Before))
	}
	none, all := true, true
	for p := range e.Before {
		if e.Added[p] == 0 {
			continue // not written to, not read before
		}
		n, err := q.Len(ctx, p)
		if err != nil {
			return false, err
		}
		none = none && n == e.Before[p]
		all = all && n == e.Before[p]+e.Added[p]
	}
	switch {
	case all && !none:
		return true, nil
	case none && !all:
		return false, nil
	}
	return false, fmt.Errorf("queue %s: the partitions' lengths show neither all %d rows nor none (another writer?)", e.Queue, e.Rows)
}

func (q *Queue) appendRouted(txn *store.Txn, rows []weir.Row, parts []int) error {
	if len(parts) != len(rows) {
		return fmt.Errorf("queue %s: %d rows but %d partitions", q.name, len(rows), len(parts))
	}
	for i, r := range rows {
		if err := q.Append(txn, parts[i], r); err != nil {
			return err
		}
	}
	return nil
}

// WriteAsProducer appends rows as producer with sequence numbers first,
// first+1, …: rows whose sequence number the queue already holds for the
// producer are dropped, and the producer's last sequence number advances in
// the same commit. It returns how many rows were new. Concurrent writes of
// one producer are serialized by a check on its row.
func (q *Queue) WriteAsProducer(ctx context.Context, producer string, first uint64, rows []weir.Row, parts []int) (int, error) {
	if producer == "" || strings.IndexByte(producer, 0) >= 0 {
		return 0, fmt.Errorf("queue %s: invalid producer id %q", q.name, producer)
	}
	if first == 0 {
		return 0, fmt.Errorf("queue %s: sequence numbers start at 1", q.name)
	}
	pkey := append(append([]byte(q.name), 0), producer...)
	for {
		v, ok, err := q.st.Get(ctx, store.Producers, pkey)
		if err != nil {
			return 0, fmt.Errorf("queue %s: read producer %s: %w", q.name, producer, err)
		}
		var last uint64
		if ok {
			if len(v) != 8 {
				return 0, fmt.Errorf("queue %s: producer %s: corrupt sequence number", q.name, producer)
			}
			last = binary.BigEndian.Uint64(v)
		}
		skip := 0
		if last >= first {
			skip = int(min(last-first+1, uint64(len(rows))))
		}
		if skip == len(rows) {
			return 0, nil
		}
		txn := store.NewTxn()
		if ok {
			txn.CheckValue(store.Producers, pkey, v)
		} else {
			txn.CheckAbsent(store.Producers, pkey)
		}
		if err := q.appendRouted(txn, rows[skip:], parts[skip:]); err != nil {
			return 0, err
		}
		txn.Put(store.Producers, pkey, binary.BigEndian.AppendUint64(nil, first+uint64(len(rows))-1))
		err = q.st.Commit(ctx, txn)
		if errors.Is(err, store.ErrConflict) {
			continue // another write of this producer landed: re-read
		}
		if err != nil {
			return 0, fmt.Errorf("write to queue %s as producer %s: %w", q.name, producer, err)
		}
		return len(rows) - skip, nil
	}
}

// Row is a row read from a queue.
type Row struct {
	Partition int
	Index     uint64
	Timestamp store.Timestamp
	Row       weir.Row
	// Size is the length of the row's encoding in the store: what reading
	// it cost, without walking the decoded map again.
	Size int
}

// Columns returns the row's columns plus $tablet_index, $row_index and
// $timestamp.
func (r Row) Columns() weir.Row {
	out := make(weir.Row, len(r.Row)+3)
	for k, v := range r.Row {
		out[k] = v
	}
	out[ColTabletIndex] = int64(r.Partition)
	out[ColRowIndex] = int64(r.Index)
	out[ColTimestamp] = uint64(r.Timestamp)
	return out
}

// Read returns up to limit rows of partition p starting at row index from
// (limit 0: no limit).
func (q *Queue) Read(ctx context.Context, p int, from uint64, limit int) ([]Row, error) {
	if err := q.checkPartition(p); err != nil {
		return nil, err
	}
	end, known := q.tail(p)
	return q.read(ctx, p, from, limit, end, known)
}

// read is Read of a valid partition p whose end, if known, is end: a poll
// of a partition with nothing new costs no store read (a Pebble iterator's
// seek through every level).
func (q *Queue) read(ctx context.Context, p int, from uint64, limit int, end uint64, known bool) ([]Row, error) {
	if known && end <= from {
		return nil, nil
	}
	prefix := q.rowPrefix(p)
	lo := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), from)
	hi := append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	var out []Row
	if limit > 0 {
		out = make([]Row, 0, min(limit, 4096))
	}
	var derr error
	err := q.st.Scan(ctx, store.Range{Table: store.QueueRows, Lo: lo, Hi: hi, Limit: limit}, func(k, v []byte) bool {
		r, err := decodeRow(p, k[len(prefix):], v)
		if err != nil {
			derr = fmt.Errorf("queue %s partition %d: %w", q.name, p, err)
			return false
		}
		out = append(out, r)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// tail is partition p's end (one past its last row index), from a store
// that knows its sequences' ends (store.SequenceTails); ok false
// otherwise. REQUIRES: p is valid.
func (q *Queue) tail(p int) (end uint64, ok bool) {
	if q.tails == nil {
		return 0, false
	}
	return q.tails.SequenceEnd(store.QueueRows, q.rowPrefix(p))
}

// watch is tail with a channel closed when the partition grows.
func (q *Queue) watch(p int) (end uint64, grew <-chan struct{}, ok bool) {
	if q.tails == nil {
		return 0, nil, false
	}
	return q.tails.WatchSequence(store.QueueRows, q.rowPrefix(p))
}

// Len returns the number of rows of partition p (its next row index).
func (q *Queue) Len(ctx context.Context, p int) (uint64, error) {
	if err := q.checkPartition(p); err != nil {
		return 0, err
	}
	prefix := q.rowPrefix(p)
	hi := append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	var n uint64
	err := q.st.Scan(ctx, store.Range{Table: store.QueueRows, Lo: prefix, Hi: hi, Reverse: true, Limit: 1}, func(k, v []byte) bool {
		if len(k) == len(prefix)+8 {
			n = binary.BigEndian.Uint64(k[len(prefix):]) + 1
		}
		return false
	})
	return n, err
}

func decodeRow(p int, idx, v []byte) (Row, error) {
	if len(idx) != 8 || len(v) < 8 {
		return Row{}, errors.New("malformed queue row")
	}
	row, _, err := codec.DecodeRow(v[8:])
	if err != nil {
		return Row{}, err
	}
	return Row{Partition: p, Index: binary.BigEndian.Uint64(idx), Timestamp: store.Timestamp(binary.BigEndian.Uint64(v[:8])), Row: row, Size: len(v) - 8}, nil
}

const metaVersion = 1

func encodeMeta(n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{metaVersion}, uint32(n))
}

func decodeMeta(v []byte) (int, error) {
	if len(v) != 5 || v[0] != metaVersion {
		return 0, errors.New("unknown queue metadata format")
	}
	return int(binary.BigEndian.Uint32(v[1:])), nil
}

// PartitionOf spreads a row over n partitions: by the hash of its key
// column when present, else by fallback (for example a message id), so the
// same row always lands in the same partition.
func PartitionOf(row weir.Row, keyColumn string, n int, fallback []byte) int {
	if h, ok := keyHash(row, keyColumn); ok {
		return int(h % uint64(n))
	}
	return int(codec.Hash64(fallback) % uint64(n))
}

// keyHash is the hash of row's key column, if it has one that encodes as
// a key.
func keyHash(row weir.Row, keyColumn string) (uint64, bool) {
	var buf [64]byte // the usual short key is encoded on the stack
	if v, ok := row[keyColumn]; ok && v != nil {
		if k, err := codec.AppendKey(buf[:0], v); err == nil {
			return codec.Hash64(k), true
		}
	}
	return 0, false
}
