package store

import (
	"bytes"
	"fmt"
	"slices"
)

// MutationKind says what a Mutation does.
type MutationKind uint8

const (
	// Put sets Key to Value.
	Put MutationKind = iota + 1
	// Delete removes Key.
	Delete
	// DeleteRange removes every key in [Key, End).
	DeleteRange
	// Append adds Value as the next row of the ordered sequence Key (see
	// Txn.Append).
	Append
)

// Mutation is one write of a Txn.
type Mutation struct {
	Kind  MutationKind
	Table Table
	Key   []byte
	Value []byte // Put only
	End   []byte // DeleteRange only
}

// Check is a condition of a Txn: the commit applies only if the committed
// value of Key equals Value (Absent: the key does not exist); otherwise it
// fails with ErrConflict and writes nothing. A check sees the state before
// its own Txn's writes.
//
// A check is atomic with its commit against every other commit, checked or
// not — a blind Put, a Delete, a DeleteRange covering the key, from any
// process: the successful commits take effect in one order in which every
// commit's checks hold on the state the commits before it left. No commit
// writes a checked key between the check's evaluation and its commit's
// write, so a read-modify-write guarded by a check never loses a
// concurrent update of the key. A commit that races another writing a key
// it checks either waits for that commit and is judged on its result, or
// is judged before it; ErrConflict means a check did not hold on one of
// those states. A backend may also refuse such a commit with a retriable
// error (PostgreSQL breaking a lock cycle). A check covers its one key: a
// key another commit adds inside a range this one scanned is not noticed.
// storetest's CheckRaces and CheckRaceRounds test this.
//
// Checks guard epoch commits (the partition_transactions row) and the
// read-modify-write paths that have no lease to serialize them: queue
// producers, controller state, external state.
type Check struct {
	Table  Table
	Key    []byte
	Value  []byte
	Absent bool
}

// Txn collects the mutations, checks and prerequisite leases of one commit.
// It is a plain builder: nothing touches the store until Store.Commit. Later
// mutations of the same key win over earlier ones, in order. A Txn is not
// safe for concurrent use.
type Txn struct {
	prerequisites []LeaseID
	mutations     []Mutation
	checks        []Check
	bytes         int
}

// NewTxn returns an empty Txn whose commit requires every given lease to be
// active. Zero lease ids are ignored.
func NewTxn(prerequisites ...LeaseID) *Txn {
	t := &Txn{}
	t.Recycle(prerequisites...)
	return t
}

// Put sets key to value. The Txn keeps the slices; the caller must not modify
// them afterwards.
func (t *Txn) Put(table Table, key, value []byte) {
	t.mutations = append(t.mutations, Mutation{Kind: Put, Table: table, Key: key, Value: value})
	t.bytes += len(key) + len(value)
}

// Recycle empties t for the next transaction of its owner, with
// prerequisites, keeping the capacity of its mutation list (an epoch's
// transaction is rebuilt every epoch at about the same size). The
// mutations are cleared so that the spare capacity keeps no key or value
// alive. Only a transaction the store is done with may be recycled: after
// Store.Commit returned (a store does not keep a Txn's mutation list past
// Commit; keys and values it may keep, they are never modified).
func (t *Txn) Recycle(prerequisites ...LeaseID) {
	clear(t.mutations)
	clear(t.checks)
	t.mutations, t.checks = t.mutations[:0], t.checks[:0]
	t.prerequisites = t.prerequisites[:0]
	for _, id := range prerequisites {
		if id != 0 {
			t.prerequisites = append(t.prerequisites, id)
		}
	}
	t.bytes = 0
}

// Cap is the number of mutations t holds room for.
func (t *Txn) Cap() int { return cap(t.mutations) }

// Grow makes room for n more mutations without reallocating: a caller that
// knows its transaction's size (a job's epochs are alike) saves the
// doublings of a growing slice, each a copy of every mutation so far.
func (t *Txn) Grow(n int) {
	if n > 0 {
		t.mutations = slices.Grow(t.mutations, n)
	}
}

// Delete removes key.
func (t *Txn) Delete(table Table, key []byte) {
	t.mutations = append(t.mutations, Mutation{Kind: Delete, Table: table, Key: key})
	t.bytes += len(key)
}

// DeleteRange removes every key in [lo, hi) of table. A nil hi means "to the
// end of the table".
func (t *Txn) DeleteRange(table Table, lo, hi []byte) {
	t.mutations = append(t.mutations, Mutation{Kind: DeleteRange, Table: table, Key: lo, End: hi})
	t.bytes += len(lo) + len(hi)
}

// Append adds rows to the ordered sequence named prefix in table (an
// ordered table, like a YTsaurus queue tablet). At commit the backend gives
// each row the next index of the sequence — dense from 0, in commit order,
// never reused — and a timestamp: a store Timestamp issued during the
// commit, strictly greater than the sequence's previous row's. The row is
// stored under key prefix + BE64(index) with value BE64(timestamp) + value.
// Appends to one sequence from concurrent commits are serialized; appends to
// different sequences are not. A Txn's appends to a sequence keep their
// order. REQUIRES: nothing else writes keys under prefix.
func (t *Txn) Append(table Table, prefix []byte, values ...[]byte) {
	for _, v := range values {
		t.mutations = append(t.mutations, Mutation{Kind: Append, Table: table, Key: prefix, Value: v})
		t.bytes += len(prefix) + len(v) + 16
	}
}

// Clone returns a copy of t that later changes to t do not affect (the
// slices of keys and values are shared: they are never modified). Fault
// injectors use it to keep an attempt as it was sent.
func (t *Txn) Clone() *Txn {
	return &Txn{
		prerequisites: append([]LeaseID(nil), t.prerequisites...),
		mutations:     append([]Mutation(nil), t.mutations...),
		checks:        append([]Check(nil), t.checks...),
		bytes:         t.bytes,
	}
}

// CheckValue makes the commit conditional on key's committed value equalling value.
func (t *Txn) CheckValue(table Table, key, value []byte) {
	t.checks = append(t.checks, Check{Table: table, Key: key, Value: value})
}

// CheckAbsent makes the commit conditional on key not existing.
func (t *Txn) CheckAbsent(table Table, key []byte) {
	t.checks = append(t.checks, Check{Table: table, Key: key, Absent: true})
}

// Prerequisites returns the leases the commit requires.
func (t *Txn) Prerequisites() []LeaseID { return t.prerequisites }

// Mutations returns the writes, in order.
func (t *Txn) Mutations() []Mutation { return t.mutations }

// Checks returns the conditions.
func (t *Txn) Checks() []Check { return t.checks }

// Len is the number of mutations.
func (t *Txn) Len() int { return len(t.mutations) }

// Bytes is the total size of keys and values written.
func (t *Txn) Bytes() int { return t.bytes }

// Empty reports whether the Txn writes nothing and checks nothing. An empty
// Txn with prerequisites is still meaningful: committing it probes that the
// leases are active.
func (t *Txn) Empty() bool { return len(t.mutations) == 0 && len(t.checks) == 0 }

// Validate reports the first malformed mutation or check: an invalid table
// name, an empty key, or an inverted range.
func (t *Txn) Validate() error {
	for i, m := range t.mutations {
		if !m.Table.Valid() {
			return fmt.Errorf("store: mutation %d: invalid table name %q", i, m.Table)
		}
		if m.Kind != DeleteRange && m.Kind != Append && len(m.Key) == 0 {
			return fmt.Errorf("store: mutation %d on table %s: empty key", i, m.Table)
		}
		if m.Kind == DeleteRange && m.End != nil && bytes.Compare(m.Key, m.End) > 0 {
			return fmt.Errorf("store: mutation %d on table %s: range start after range end", i, m.Table)
		}
	}
	for i, c := range t.checks {
		if !c.Table.Valid() {
			return fmt.Errorf("store: check %d: invalid table name %q", i, c.Table)
		}
		if len(c.Key) == 0 {
			return fmt.Errorf("store: check %d on table %s: empty key", i, c.Table)
		}
	}
	return nil
}
